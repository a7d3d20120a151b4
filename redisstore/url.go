package redisstore

import (
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice"
)

// Open parses a Redis URL, connects a client for it and returns a Store
// that owns the client (Close closes it). It is the constructor a
// configuration file's `store: redis://...` calls:
//
//	redis://[user:password@]host:port[/db][?options]     one node (rediss:// for TLS)
//	redis+cluster://host:port[?addr=host2:port2&addr=...] Redis Cluster
//	rediss+cluster://...                                  Cluster over TLS
//
// The options are go-redis's (redis.ParseURL, redis.ParseClusterURL). The
// client's socket timeouts are set to cfg.Timeout and its retries to 0:
// the store, not the client, decides what a slow Redis costs.
func Open(url string, cfg Config) (*Store, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	client, err := newClient(url, cfg)
	if err != nil {
		return nil, err
	}
	s, err := New(client, cfg)
	if err != nil {
		client.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

func newClient(url string, cfg Config) (redis.UniversalClient, error) {
	bad := func(err error) error {
		return sluice.NewConfigError("redisstore", "url", url, "a redis://, rediss://, redis+cluster:// or rediss+cluster:// URL ("+err.Error()+")")
	}
	switch {
	case strings.HasPrefix(url, "redis+cluster://"), strings.HasPrefix(url, "rediss+cluster://"):
		u := strings.Replace(url, "+cluster", "", 1)
		opt, err := redis.ParseClusterURL(u)
		if err != nil {
			return nil, bad(err)
		}
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = dialTimeout(cfg), cfg.Timeout, cfg.Timeout
		opt.ContextTimeoutEnabled = true
		opt.MaxRetries = -1
		opt.DialerRetries = 1 // a dead Redis: the breaker, not the pool, decides when to try again
		opt.PoolSize = max(opt.PoolSize, 4*cfg.Pipelines)
		return redis.NewClusterClient(opt), nil
	case strings.HasPrefix(url, "redis://"), strings.HasPrefix(url, "rediss://"), strings.HasPrefix(url, "unix://"):
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, bad(err)
		}
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = dialTimeout(cfg), cfg.Timeout, cfg.Timeout
		opt.ContextTimeoutEnabled = true
		opt.MaxRetries = -1
		opt.DialerRetries = 1 // a dead Redis: the breaker, not the pool, decides when to try again
		return redis.NewClient(opt), nil
	}
	return nil, sluice.NewConfigError("redisstore", "url", url, "must start with redis://, rediss://, redis+cluster:// or rediss+cluster://")
}

// dialTimeout: a dial is a round trip and a half; give it a little more
// than a call, but never so much that a dead host stalls a probe.
func dialTimeout(cfg Config) time.Duration { return max(2*cfg.Timeout, 10*time.Millisecond) }
