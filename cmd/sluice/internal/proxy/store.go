package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/redisstore"
)

// StoreSpec is a shared store: a Redis (one node or a Cluster) through
// which several proxies share their limits. A policy names it in its
// store field. See docs/proxy.md.
type StoreSpec struct {
	Name string `yaml:"name" json:"name"`
	// URL is redis://, rediss://, redis+cluster:// or rediss+cluster://;
	// write a password as ${ENV}. GET /config shows it redacted.
	URL              string        `yaml:"url" json:"url"`
	Timeout          time.Duration `yaml:"timeout" json:"timeout"`
	Failure          string        `yaml:"failure" json:"failure"`
	Replicas         int           `yaml:"replicas" json:"replicas"`
	Heartbeat        time.Duration `yaml:"heartbeat" json:"heartbeat"`
	BreakerThreshold int           `yaml:"breaker_threshold" json:"breaker_threshold"`
	BreakerCooldown  time.Duration `yaml:"breaker_cooldown" json:"breaker_cooldown"`
}

// MarshalYAML writes the spec with the URL's password hidden, for
// GET /config: the file's ${ENV} is expanded in memory.
func (s StoreSpec) MarshalYAML() (any, error) {
	type plain StoreSpec
	p := plain(s)
	p.URL = redactURL(s.URL)
	return p, nil
}

// redactURL hides a URL's password ("xxxxx"), for logs, errors and the
// admin API; a URL that does not parse is hidden whole.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "<a URL that does not parse>"
	}
	return u.Redacted()
}

// storeDefinition is what decides whether a reload keeps a store: every
// field, the real URL included.
func storeDefinition(s StoreSpec) string {
	type plain StoreSpec // no MarshalYAML; json ignores it anyway
	b, err := json.Marshal(plain(s))
	if err != nil { // plain values only
		panic(err)
	}
	return string(b)
}

// Defaults and bounds of a store.
const (
	DefaultStoreTimeout = redisstore.DefaultTimeout
	maxReplicas         = 10000
)

var storeSchemes = []string{"redis://", "rediss://", "redis+cluster://", "rediss+cluster://"}

// validateStore checks s and fills in its defaults; at is its path.
func (c *Config) validateStore(s *StoreSpec, at string) error {
	if s.Name == "" {
		return c.errAt(at+".name", "required")
	}
	if s.Name == "memory" {
		return c.errAt(at+".name", `"memory" names the in-process store: choose another name`)
	}
	ok := false
	for _, p := range storeSchemes {
		ok = ok || strings.HasPrefix(s.URL, p)
	}
	if !ok {
		return c.errAt(at+".url", "%q: want a redis://, rediss://, redis+cluster:// or rediss+cluster:// URL", redactURL(s.URL))
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultStoreTimeout
	} else if s.Timeout < 100*time.Microsecond || s.Timeout > 10*time.Second {
		return c.errAt(at+".timeout", "must be within [100µs, 10s], got %v", s.Timeout)
	}
	if s.Failure == "" {
		s.Failure = "open"
	}
	if _, err := redisstore.ParseFailure(s.Failure); err != nil {
		return c.errAt(at+".failure", "%q: want open, closed or local", s.Failure)
	}
	if s.Replicas < 0 || s.Replicas > maxReplicas {
		return c.errAt(at+".replicas", "must be within [0, %d] (0: counted by the heartbeat, 1 without one), got %d", maxReplicas, s.Replicas)
	}
	if s.Heartbeat != 0 && (s.Heartbeat < 10*time.Millisecond || s.Heartbeat > time.Minute) {
		return c.errAt(at+".heartbeat", "must be 0 (off) or within [10ms, 1m], got %v", s.Heartbeat)
	}
	if s.Failure == "local" && s.Replicas == 0 && s.Heartbeat == 0 {
		return c.errAt(at+".replicas", "failure: local divides the limit by the replicas: give replicas or heartbeat")
	}
	if s.BreakerThreshold == 0 {
		s.BreakerThreshold = redisstore.DefaultBreakerThreshold
	} else if s.BreakerThreshold < 1 || s.BreakerThreshold > 1000 {
		return c.errAt(at+".breaker_threshold", "must be within [1, 1000], got %d", s.BreakerThreshold)
	}
	if s.BreakerCooldown == 0 {
		s.BreakerCooldown = redisstore.DefaultBreakerCooldown
	} else if s.BreakerCooldown < time.Millisecond || s.BreakerCooldown > time.Minute {
		return c.errAt(at+".breaker_cooldown", "must be within [1ms, 1m], got %v", s.BreakerCooldown)
	}
	return nil
}

// store is a StoreSpec opened. Reloads keep a store whose definition did
// not change, with its client, its breaker and its counters.
type store struct {
	name    string
	def     string
	spec    StoreSpec
	failure redisstore.Failure
	s       *redisstore.Store
	// metrics are promsluice's sluice_store_* series, labelled store=name.
	metrics *promsluice.Collector
}

// openStore connects nothing yet (go-redis dials on the first call), so a
// config check does not need Redis up; a URL that does not parse is an
// error at its line, with the password hidden.
func (c *Config) openStore(spec StoreSpec, at string) (*store, error) {
	f, err := redisstore.ParseFailure(spec.Failure)
	if err != nil { // validated
		return nil, c.errAt(at+".failure", "%v", err)
	}
	s, err := redisstore.Open(spec.URL, redisstore.Config{
		Timeout:          spec.Timeout,
		BreakerThreshold: spec.BreakerThreshold,
		BreakerCooldown:  spec.BreakerCooldown,
		Heartbeat:        spec.Heartbeat,
	})
	if err != nil {
		// Not wrapAt: the message goes at the field's line; redisstore
		// redacts the URL in its errors (TestOpenRedactsURL).
		return nil, c.errAt(at+".url", "%s", err.Error())
	}
	col, err := promsluice.NewStoreCollector(spec.Name, s)
	if err != nil { // a name validateStore let through that is not a label value
		s.Close()
		return nil, c.errAt(at+".name", "%v", err)
	}
	return &store{name: spec.Name, def: storeDefinition(spec), spec: spec, failure: f, s: s, metrics: col}, nil
}

// storeName is how logs and errors name a store: its name and redacted URL.
func (st *store) String() string { return fmt.Sprintf("%s (%s)", st.name, redactURL(st.spec.URL)) }

// redisLog sends go-redis's own log lines (a failed dial while Redis is
// down, say) to the proxy's log, at warn, in its format, instead of
// go-redis's default logger on stderr. go-redis has one logger per
// process: the last Server made sets it.
type redisLog struct{ log *slog.Logger }

func (r redisLog) Printf(_ context.Context, format string, v ...any) {
	r.log.Warn(strings.TrimSpace(fmt.Sprintf(format, v...)), "log", "redis")
}

func setRedisLog(log *slog.Logger) { redis.SetLogger(redisLog{log}) }
