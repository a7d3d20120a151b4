package redisstore

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/redisstore/redistest"
	"go.uber.org/goleak"
)

// The tests share one redis-server and one three-master Cluster, started
// here on free loopback ports and stopped at the end; tests that kill or
// pause Redis start their own. No redis-server: the tests fail.
var (
	srv     *redistest.Server
	cluster *redistest.Cluster
)

// quiet drops go-redis's log lines (failed dials to the servers the fault
// tests kill), which would bury the test output.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	var err error
	srv, err = redistest.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "redisstore tests need redis-server:", err)
		os.Exit(1)
	}
	cluster, err = redistest.StartCluster(3)
	if err != nil {
		srv.Close()
		fmt.Fprintln(os.Stderr, "redisstore tests need a Redis Cluster:", err)
		os.Exit(1)
	}
	code := m.Run()
	srv.Close()
	cluster.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// newStore opens a store on the shared server, flushes it, and closes the
// store when t ends.
func newStore(t testing.TB, cfg Config) *Store {
	t.Helper()
	return openStore(t, srv.URL(), cfg, true)
}

func openStore(t testing.TB, url string, cfg Config, flush bool) *Store {
	t.Helper()
	s, err := Open(url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if flush {
		// Its own client: the store's has the store's few-ms timeouts.
		c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		defer c.Close()
		if err := c.FlushAll(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// ownStore opens a store with cfg on a redis-server of its own, for a test
// that pauses or kills it, and checks that it answers. The server is
// killed when the test ends, after the store closes.
func ownStore(t *testing.T, cfg Config) (*redistest.Server, *Store) {
	t.Helper()
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rs.Close)
	s := openStore(t, rs.URL(), cfg, false)
	if err := s.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	return rs, s
}
