package redis

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// CPU reads the CPU time used so far by this process (the client) and by
// a redis-server (from /proc, Linux only), so that a benchmark can report
// CPU per decision on each side: on a machine shared with other work,
// CPU time per decision is steadier than wall-clock throughput. It also
// reads the time Redis counts for running scripts (INFO commandstats):
// what the scripts cost, apart from the system calls around them.
type CPU struct {
	serverPid int
	client    *goredis.Client // its own connection, for INFO
}

// NewCPU finds the pid of the redis-server at addr (INFO server). Close
// it when done.
func NewCPU(ctx context.Context, addr string) (*CPU, error) {
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		c.Close()
		return nil, err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			pid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				c.Close()
				return nil, err
			}
			return &CPU{serverPid: pid, client: c}, nil
		}
	}
	c.Close()
	return nil, fmt.Errorf("no process_id in INFO server")
}

// Close closes the connection to the server.
func (c *CPU) Close() error { return c.client.Close() }

// Sample is the CPU time used by the client and the server so far, and
// the part of the server's that Redis counts as running scripts.
type Sample struct{ Client, Server, Script time.Duration }

// Sub is the time between two samples.
func (s Sample) Sub(o Sample) Sample {
	return Sample{s.Client - o.Client, s.Server - o.Server, s.Script - o.Script}
}

// Now samples both processes. The server's time has the kernel's tick
// resolution (10 ms): measure over seconds, not milliseconds.
func (c *CPU) Now() (Sample, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return Sample{}, err
	}
	s := Sample{Client: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(c.serverPid) + "/stat")
	if err != nil {
		return Sample{}, err
	}
	// Fields after the command (which may hold spaces) start after ")":
	// state is field 3, utime 14, stime 15.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return Sample{}, fmt.Errorf("short /proc stat: %q", b)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return Sample{}, fmt.Errorf("bad /proc stat: %q", b)
	}
	s.Server = time.Duration(ut+st) * (time.Second / 100) // USER_HZ is 100 on Linux
	if s.Script, err = c.scriptTime(); err != nil {
		return Sample{}, err
	}
	return s, nil
}

// scriptTime is the time Redis has spent in EVALSHA and EVAL calls
// (usec= of INFO commandstats: the script's run, from the command's
// start to its reply, without reading the request or writing the reply).
func (c *CPU) scriptTime() (time.Duration, error) {
	info, err := c.client.Info(context.Background(), "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for line := range strings.Lines(info) {
		for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
			rest, ok := strings.CutPrefix(line, cmd)
			if !ok {
				continue
			}
			_, v, ok := strings.Cut(rest, "usec=")
			if !ok {
				return 0, fmt.Errorf("no usec in %q", line)
			}
			v, _, _ = strings.Cut(v, ",")
			us, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("bad usec in %q", line)
			}
			total += time.Duration(us) * time.Microsecond
		}
	}
	return total, nil
}
