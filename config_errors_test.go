package sluice_test

import (
	"errors"
	"net"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/netlimit"
	"github.com/sluicehq/sluice/rate"
)

// Every constructor's validation error matches sluice.ErrInvalidConfig as
// well as its own package's sentinel, so one errors.Is tells a configuration
// mistake from anything else.
func TestConfigErrorsShareOneSentinel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cases := []struct {
		name string
		own  error
		make func() error
	}{
		{"rate", rate.ErrInvalidConfig, func() error { _, err := rate.NewBucket(rate.Config{Rate: -1}); return err }},
		{"concurrency", concurrency.ErrInvalidConfig, func() error { _, err := concurrency.New(concurrency.Config{Limit: -1}); return err }},
		{"adaptive", adaptive.ErrInvalidConfig, func() error { _, err := adaptive.NewAIMD(adaptive.AIMDConfig{Backoff: 2}); return err }},
		{"keyed", keyed.ErrInvalidConfig, func() error { _, err := keyed.NewBuckets(keyed.BucketsConfig{MaxKeys: -1}); return err }},
		{"client", client.ErrInvalidConfig, func() error { _, err := client.NewExecutor(-1); return err }},
		{"httplimit", httplimit.ErrInvalidConfig, func() error { _, err := httplimit.New(nil, httplimit.Config{}); return err }},
		{"netlimit", netlimit.ErrInvalidConfig, func() error { _, err := netlimit.NewListener(ln, netlimit.Config{MaxPending: -1}); return err }},
	}
	for _, c := range cases {
		err := c.make()
		if err == nil {
			t.Errorf("%s: bad config accepted", c.name)
			continue
		}
		if !errors.Is(err, sluice.ErrInvalidConfig) || !errors.Is(err, c.own) {
			t.Errorf("%s: %v does not match both sluice.ErrInvalidConfig and its own sentinel", c.name, err)
		}
	}
}
