// Package outfile writes an output file that takes its path's place only
// when complete: a run that fails, or a write that fails halfway, leaves
// whatever was at the path before untouched.
package outfile

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// File is an output file (sluice sim -plot, load -series, the lab's
// report) that takes its path's place only when complete. A run that
// fails, or a write that fails halfway, leaves whatever was at the path
// before untouched: exit 2 promises that nothing changed, and a failed
// rerun must not cost the last good plot or report.
//
// It writes a temporary file in the path's directory, so that the final
// rename stays on one file system and is atomic. A path that exists and
// is not a regular file (/dev/stdout, a pipe) is written directly, as
// there is nothing there to lose and nothing a rename could replace.
type File struct {
	*os.File
	path string // what the user asked for, for messages
	dst  string // path with its symbolic links resolved: what Commit replaces
	tmp  bool   // File is a temporary file, renamed to dst by Commit
}

// Create opens an output file for path. Whatever would make the final
// write fail is checked here, before the run: a directory that cannot be
// written, an existing file that may not be written, a path that is a
// directory.
func Create(path string) (*File, error) {
	fi, err := os.Stat(path)
	switch {
	case err == nil && !fi.Mode().IsRegular():
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		return &File{File: f, path: path, dst: path}, nil
	case err == nil:
		// os.Create would refuse a file we may not write; so does this,
		// without truncating it.
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		f.Close()
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	// A link is replaced at its target, as os.Create would have written
	// through it. A path that does not exist yet resolves to itself.
	dst := resolve(path)
	dir, base := filepath.Split(dst)
	for range 100 {
		name := filepath.Join(dir, "."+base+"."+strconv.FormatUint(rand.Uint64(), 36)+".tmp")
		// 0o666 as os.Create, so the umask decides the final mode.
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			// Name the path asked for: the temporary name means nothing to
			// the user.
			return nil, &fs.PathError{Op: "open", Path: path, Err: errors.Unwrap(err)}
		}
		if fi != nil {
			// Replacing a file keeps its mode, as writing into it did.
			if err := f.Chmod(fi.Mode().Perm()); err != nil {
				f.Close()
				os.Remove(name)
				return nil, err
			}
		}
		return &File{File: f, path: path, dst: dst, tmp: true}, nil
	}
	return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrExist}
}

// resolve returns path with its symbolic links followed: what os.Create
// writes. A link to a file that does not exist yet resolves to that file,
// which os.Create makes (EvalSymlinks fails on it, and the rename
// replaced the link).
func resolve(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	for range 40 { // Linux's limit on the links one open follows
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return path
		}
		t, err := os.Readlink(path)
		if err != nil {
			return path
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(path), t)
		}
		path = t
	}
	return path
}

// Path returns the path the file was created for.
func (f *File) Path() string { return f.path }

// Commit closes the file and puts it at its path.
func (f *File) Commit() error {
	err := f.File.Close()
	if !f.tmp {
		return err
	}
	if err == nil {
		err = os.Rename(f.File.Name(), f.dst)
	}
	if err != nil {
		os.Remove(f.File.Name())
	}
	return err
}

// Discard closes the file and leaves the path as it was. After Commit it
// does nothing, so that it can be deferred.
func (f *File) Discard() {
	if f.File.Close() == nil && f.tmp {
		os.Remove(f.File.Name())
	}
}
