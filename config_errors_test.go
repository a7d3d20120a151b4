package sluice_test

import (
	"errors"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/keyed"
	"github.com/sluicehq/sluice/netlimit"
	"github.com/sluicehq/sluice/rate"
)

// Every constructor and setter of the library answers a bad value with a
// *sluice.ConfigError that names its package and field and matches
// sluice.ErrInvalidConfig: one errors.Is tells a configuration mistake from
// anything else, one errors.As reads which field it was. (promsluice, its
// own module, checks its constructors in its own tests.)
func TestConfigErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	bucket := func() *rate.Bucket {
		b, err := rate.NewBucket(rate.Config{Rate: 1, Burst: 1})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	newBuckets := func(c rate.Config) func() error {
		return func() error { _, err := keyed.NewBuckets(keyed.BucketsConfig{Bucket: c}); return err }
	}
	newLimit := func(c concurrency.Config) func() error {
		return func() error { _, err := concurrency.New(c); return err }
	}
	newMap := func(c keyed.Config[*rate.Bucket]) func() error {
		return func() error { _, err := keyed.New(c); return err }
	}
	mk := func(key string) (*rate.Bucket, error) { return rate.NewBucket(rate.Config{Rate: 1, Burst: 1}) }
	listen := func(c netlimit.Config) func() error {
		return func() error { _, err := netlimit.NewListener(ln, c); return err }
	}
	cases := []struct {
		pkg, field string
		make       func() error
	}{
		{"rate", "Config.Rate", func() error { _, err := rate.NewBucket(rate.Config{Rate: -1}); return err }},
		{"rate", "Config.Rate", func() error { _, err := rate.NewBucket(rate.Config{Rate: math.NaN()}); return err }},
		{"rate", "Config.Burst", func() error { _, err := rate.NewBucket(rate.Config{Burst: -1}); return err }},
		{"rate", "Config.MaxWait", func() error { _, err := rate.NewBucket(rate.Config{MaxWait: -1}); return err }},
		{"rate", "Config.Rate", func() error { return bucket().SetRate(-1) }},
		{"rate", "Config.Rate", func() error { return bucket().SetRateAt(time.Now(), math.NaN()) }},
		{"rate", "Config.Burst", func() error { return bucket().SetBurst(-1) }},
		{"rate", "Config.Burst", func() error { return bucket().SetBurstAt(time.Now(), -1) }},
		{"rate", "Config.MaxWait", func() error { return bucket().SetMaxWait(-1) }},

		{"concurrency", "Config.Limit", newLimit(concurrency.Config{Limit: -1})},
		{"concurrency", "Config.Limit", newLimit(concurrency.Config{Limit: concurrency.MaxLimit + 1})},
		{"concurrency", "Config.MaxQueue", newLimit(concurrency.Config{Limit: 1, MaxQueue: -1})},
		{"concurrency", "Config.MaxWait", newLimit(concurrency.Config{Limit: 1, MaxWait: -1})},
		{"concurrency", "Config.Discipline", newLimit(concurrency.Config{Limit: 1, Discipline: 99})},
		{"concurrency", "Config.CoDelTarget", newLimit(concurrency.Config{Limit: 1, CoDelTarget: -1})},
		{"concurrency", "Config.CoDelInterval", newLimit(concurrency.Config{Limit: 1, CoDelInterval: -1})},
		{"concurrency", "Config.Limit", func() error { _, err := concurrency.NewCore(concurrency.Config{}); return err }},
		{"concurrency", "Discipline", func() error { _, err := concurrency.ParseDiscipline("random"); return err }},
		{"concurrency", "SetLimit(n)", func() error {
			l, err := concurrency.New(concurrency.Config{Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			return l.SetLimit(0)
		}},

		{"adaptive", "AIMDConfig.Backoff", func() error { _, err := adaptive.NewAIMD(adaptive.AIMDConfig{Backoff: 2}); return err }},
		{"adaptive", "AIMDConfig.MinLimit", func() error {
			_, err := adaptive.NewAIMD(adaptive.AIMDConfig{MinLimit: 10, MaxLimit: 5})
			return err
		}},
		{"adaptive", "VegasConfig.Alpha", func() error { _, err := adaptive.NewVegas(adaptive.VegasConfig{Alpha: -1}); return err }},
		{"adaptive", "Gradient2Config.Tolerance", func() error {
			_, err := adaptive.NewGradient2(adaptive.Gradient2Config{Tolerance: 0.5})
			return err
		}},

		{"keyed", "Config.New", newMap(keyed.Config[*rate.Bucket]{})},
		{"keyed", "Config.MaxKeys", newMap(keyed.Config[*rate.Bucket]{New: mk, MaxKeys: -1})},
		{"keyed", "Config.IdleTimeout", newMap(keyed.Config[*rate.Bucket]{New: mk, IdleTimeout: -1})},
		{"keyed", "BucketsConfig.MaxKeys", func() error { _, err := keyed.NewBuckets(keyed.BucketsConfig{MaxKeys: -1}); return err }},
		{"keyed", "BucketsConfig.IdleTimeout", func() error { _, err := keyed.NewBuckets(keyed.BucketsConfig{IdleTimeout: -1}); return err }},
		{"keyed", "BucketsConfig.Bucket.Rate", newBuckets(rate.Config{Rate: -1})},
		{"keyed", "BucketsConfig.Bucket.Burst", newBuckets(rate.Config{Burst: -1})},
		{"keyed", "BucketsConfig.Bucket.MaxWait", newBuckets(rate.Config{MaxWait: -1})},

		{"client", "NewExecutor(n)", func() error { _, err := client.NewExecutor(0); return err }},
		{"client", "RetryPolicy.MaxAttempts", func() error { _, err := client.NewRetrier(client.RetryPolicy{MaxAttempts: -1}); return err }},
		{"client", "RetryPolicy.BaseDelay", func() error { _, err := client.NewRetrier(client.RetryPolicy{BaseDelay: -1}); return err }},
		{"client", "RetryBudgetConfig.Ratio", func() error {
			_, err := client.NewRetryBudget(client.RetryBudgetConfig{Ratio: 11})
			return err
		}},
		{"client", "ThrottlerConfig.K", func() error { _, err := client.NewThrottler(client.ThrottlerConfig{K: 0.5}); return err }},
		{"client", "RetryPolicy.MaxAttempts", func() error {
			_, err := client.NewTransport(client.TransportConfig{Retry: client.RetryPolicy{MaxAttempts: -1}})
			return err
		}},

		{"httplimit", "next", func() error { _, err := httplimit.New(nil, httplimit.Config{}); return err }},
		{"httplimit", "Config.Limiter", func() error { _, err := httplimit.New(ok, httplimit.Config{}); return err }},
		{"httplimit", "IPConfig.TrustedProxies[0]", func() error {
			_, err := httplimit.NewClientIP(httplimit.IPConfig{TrustedProxies: []string{"nope"}})
			return err
		}},
		{"httplimit", "IPConfig.ProxyHeader", func() error {
			_, err := httplimit.NewClientIP(httplimit.IPConfig{ProxyHeader: "X-Real-IP"})
			return err
		}},
		{"httplimit", "IPConfig.IPv6Prefix", func() error { _, err := httplimit.NewClientIP(httplimit.IPConfig{IPv6Prefix: 129}); return err }},

		{"netlimit", "inner", func() error { _, err := netlimit.NewListener(nil, netlimit.Config{}); return err }},
		{"netlimit", "Config.MaxPending", listen(netlimit.Config{MaxPending: -1})},
		{"netlimit", "Config.RejectTimeout", listen(netlimit.Config{RejectTimeout: -1})},
		{"netlimit", "Config.Rejecters", listen(netlimit.Config{Rejecters: -1})},
		{"netlimit", "Config.RejectQueue", listen(netlimit.Config{RejectQueue: netlimit.MaxRejectQueue + 1})},
		{"netlimit", "Config.RejectOverRate", listen(netlimit.Config{RejectOverRate: true})},
	}
	for _, c := range cases {
		err := c.make()
		if err == nil {
			t.Errorf("%s %s: bad value accepted", c.pkg, c.field)
			continue
		}
		var ce *sluice.ConfigError
		if !errors.Is(err, sluice.ErrInvalidConfig) || !errors.As(err, &ce) {
			t.Errorf("%s %s: %v is not a *sluice.ConfigError", c.pkg, c.field, err)
			continue
		}
		if ce.Package != c.pkg || ce.Field != c.field || ce.Allowed == "" {
			t.Errorf("%s %s: got package %q field %q allowed %q", c.pkg, c.field, ce.Package, ce.Field, ce.Allowed)
		}
		if !strings.HasPrefix(err.Error(), "sluice/"+c.pkg+": "+c.field) {
			t.Errorf("%s %s: message %q does not start with the package and field", c.pkg, c.field, err)
		}
	}
}
