package redisstore

import (
	"errors"
	neturl "net/url"
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
	bad := func(err error) error { return badURL(url, err) }
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
	red, _ := redactURL(url)
	return nil, sluice.NewConfigError("redisstore", "url", red, "must start with redis://, rediss://, redis+cluster:// or rediss+cluster://")
}

// dialTimeout: a dial is a round trip and a half; give it a little more
// than a call, but never so much that a dead host stalls a probe.
func dialTimeout(cfg Config) time.Duration { return max(2*cfg.Timeout, 10*time.Millisecond) }

// redactURL is a URL fit for an error message, which ends up in logs: the
// password becomes xxxxx (so does a user with no password: some clients
// read it as the password), as do the values of query options named like
// a secret. A URL that does not parse, or whose "@" did not end up
// separating a user (an unescaped / ? or # in the password splits the URL
// elsewhere, and the password would show as host, path or query), shows
// only its scheme; shown reports which.
func redactURL(s string) (red string, shown bool) {
	u, err := neturl.Parse(s)
	if err != nil || u.Opaque != "" || (u.User == nil && strings.Contains(s, "@")) {
		if i := strings.Index(s, "://"); i > 0 && !strings.ContainsAny(s[:i], "@:/?#%") {
			return s[:i] + "://(not shown)", false
		}
		return "(not shown)", false
	}
	if u.User != nil {
		if _, ok := u.User.Password(); !ok {
			u.User = neturl.User("xxxxx")
		}
	}
	if u.RawQuery != "" {
		q, err := neturl.ParseQuery(u.RawQuery)
		if err != nil {
			return u.Scheme + "://(not shown)", false
		}
		for k := range q {
			if secretName(k) {
				q[k] = []string{"xxxxx"}
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.Redacted(), true
}

func secretName(k string) bool {
	k = strings.ToLower(k)
	for _, w := range []string{"pass", "secret", "token", "auth", "key"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// badURL is the config error for a URL the client cannot parse. Neither
// the URL nor, when the URL is not shown, the parser's message appears in
// it: net/url's errors quote the whole URL, an invalid escape or port
// quotes a piece of it, and go-redis's quote the path (all of which may be
// the password).
func badURL(url string, err error) error {
	red, shown := redactURL(url)
	var ue *neturl.Error
	detail := "not a valid URL: percent-encode the characters / ? # @ % : in the user and password"
	if shown && !errors.As(err, &ue) {
		detail = err.Error()
	}
	return sluice.NewConfigError("redisstore", "url", red, "a redis://, rediss://, redis+cluster:// or rediss+cluster:// URL ("+detail+")")
}
