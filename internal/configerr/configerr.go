// Package configerr makes each package's configuration sentinel also match
// sluice.ErrInvalidConfig, so that callers can test any constructor's error
// with one errors.Is while messages keep the package's own prefix.
package configerr

import "github.com/sluicehq/sluice"

// New returns a sentinel error with the given text that matches both itself
// and sluice.ErrInvalidConfig under errors.Is.
func New(text string) error { return &sentinel{text} }

type sentinel struct{ text string }

func (e *sentinel) Error() string { return e.text }

func (e *sentinel) Is(target error) bool { return target == sluice.ErrInvalidConfig }
