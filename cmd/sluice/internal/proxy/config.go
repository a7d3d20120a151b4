package proxy

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/yamlfile"
	"github.com/sluicehq/sluice/concurrency"
)

// Config is the proxy's config file. Every field is documented, with its
// default, in docs/proxy.md; a field added here must be added there (a test
// checks).
type Config struct {
	Listen       string         `yaml:"listen" json:"listen"`
	DrainTimeout time.Duration  `yaml:"drain_timeout" json:"drain_timeout"`
	Admin        AdminConfig    `yaml:"admin" json:"admin"`
	Server       ServerConfig   `yaml:"server" json:"server"`
	Log          LogConfig      `yaml:"log" json:"log"`
	Reload       ReloadConfig   `yaml:"reload" json:"reload"`
	ClientIP     ClientIPConfig `yaml:"client_ip" json:"client_ip"`
	// Stores are the shared stores (Redis) that policies may keep their
	// limits in, so that several proxies share them (policies[].store).
	Stores   []StoreSpec `yaml:"stores" json:"stores"`
	Routes   []Route     `yaml:"routes" json:"routes"`
	Policies []Policy    `yaml:"policies" json:"policies"`

	file  string
	lines yamlfile.Lines
}

// AdminConfig is the admin API's listener.
type AdminConfig struct {
	Listen string `yaml:"listen" json:"listen"`
}

// LogConfig is the proxy's logging.
type LogConfig struct {
	Format string `yaml:"format" json:"format"` // text or json
	Level  string `yaml:"level" json:"level"`   // debug, info, warn, error
	Access bool   `yaml:"access" json:"access"` // one line per request
}

// ReloadConfig says how the proxy notices a changed config file (it
// always reloads on SIGHUP).
type ReloadConfig struct {
	// Poll is how often the file's modification time and size are
	// checked; 0 turns the check off.
	Poll time.Duration `yaml:"poll" json:"poll"`
}

// ClientIPConfig is how the client_ip key finds a request's client.
type ClientIPConfig struct {
	TrustedProxies []string `yaml:"trusted_proxies" json:"trusted_proxies"`
	Header         string   `yaml:"header" json:"header"`
	IPv6Prefix     int      `yaml:"ipv6_prefix" json:"ipv6_prefix"`
}

// Route sends the requests it matches to an upstream, through a policy.
type Route struct {
	Name          string        `yaml:"name" json:"name"`
	Host          string        `yaml:"host" json:"host"`
	PathPrefix    string        `yaml:"path_prefix" json:"path_prefix"`
	Methods       []string      `yaml:"methods" json:"methods"`
	Upstream      string        `yaml:"upstream" json:"upstream"`
	Policy        string        `yaml:"policy" json:"policy"`
	Timeout       time.Duration `yaml:"timeout" json:"timeout"`
	StreamAfter   time.Duration `yaml:"stream_after" json:"stream_after"`
	FlushInterval time.Duration `yaml:"flush_interval" json:"flush_interval"`
}

// Policy is the limits a request passes before it goes upstream: every one
// that is set, all or nothing.
type Policy struct {
	Name              string          `yaml:"name" json:"name"`
	Key               string          `yaml:"key" json:"key"`
	Store             string          `yaml:"store" json:"store"`
	MaxKeys           int             `yaml:"max_keys" json:"max_keys"`
	Rate              *RateSpec       `yaml:"rate" json:"rate,omitempty"`
	Concurrency       *ConcSpec       `yaml:"concurrency" json:"concurrency,omitempty"`
	PerKeyConcurrency *PerKeyConcSpec `yaml:"per_key_concurrency" json:"per_key_concurrency,omitempty"`
	DryRun            bool            `yaml:"dry_run" json:"dry_run"`
	MaxWait           time.Duration   `yaml:"max_wait" json:"max_wait"`
	MaxWaiting        int             `yaml:"max_waiting" json:"max_waiting"`
	MaxWaitingPerKey  int             `yaml:"max_waiting_per_key" json:"max_waiting_per_key"`
	QuotaStatus       int             `yaml:"quota_status" json:"quota_status"`
	CapacityStatus    int             `yaml:"capacity_status" json:"capacity_status"`
}

// RateSpec is a token bucket.
type RateSpec struct {
	Rate    float64       `yaml:"rate" json:"rate"`
	Burst   int           `yaml:"burst" json:"burst"`
	PerKey  bool          `yaml:"per_key" json:"per_key"`
	MaxWait time.Duration `yaml:"max_wait" json:"max_wait"`
}

// ConcSpec is a concurrency limit with a queue, fixed or adaptive.
type ConcSpec struct {
	Limit      int                    `yaml:"limit" json:"limit"`
	MaxQueue   int                    `yaml:"max_queue" json:"max_queue"`
	MaxWait    time.Duration          `yaml:"max_wait" json:"max_wait"`
	Discipline concurrency.Discipline `yaml:"discipline" json:"discipline"`
	Adaptive   *AdaptiveSpec          `yaml:"adaptive" json:"adaptive,omitempty"`
}

// AdaptiveSpec makes a concurrency limit find itself.
type AdaptiveSpec struct {
	Algorithm    string        `yaml:"algorithm" json:"algorithm"`
	InitialLimit int           `yaml:"initial_limit" json:"initial_limit"`
	MinLimit     int           `yaml:"min_limit" json:"min_limit"`
	MaxLimit     int           `yaml:"max_limit" json:"max_limit"`
	Timeout      time.Duration `yaml:"timeout" json:"timeout"`
}

// PerKeyConcSpec is a concurrency limit per key.
type PerKeyConcSpec struct {
	Limit    int           `yaml:"limit" json:"limit"`
	MaxQueue int           `yaml:"max_queue" json:"max_queue"`
	MaxWait  time.Duration `yaml:"max_wait" json:"max_wait"`
}

// Defaults.
const (
	DefaultListen           = ":8080"
	DefaultAdminListen      = "127.0.0.1:9090"
	DefaultDrainTimeout     = 30 * time.Second
	DefaultPoll             = 2 * time.Second
	DefaultTimeout          = 30 * time.Second
	DefaultStreamAfter      = 10 * time.Second
	DefaultMaxKeys          = 65536
	DefaultMaxWait          = time.Second
	DefaultMaxWaiting       = 1024
	DefaultMaxWaitingPerKey = 8
	maxMaxKeys              = 1 << 24
	minPoll                 = 100 * time.Millisecond
	maxPolicyName           = 128
)

// LoadConfig reads, decodes and validates the config file at path. Every
// problem in the file is an error naming file, line and field
// (*yamlfile.Error, matching yamlfile.ErrInvalid); others are I/O errors.
func LoadConfig(path string) (*Config, error) {
	data, err := yamlfile.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseConfig(path, data)
}

// ParseConfig decodes and validates a config file's contents; name is the
// file in errors. ${NAME} in values is replaced by the environment
// variable NAME.
func ParseConfig(name string, data []byte) (*Config, error) {
	c := &Config{
		Listen:       DefaultListen,
		DrainTimeout: DefaultDrainTimeout,
		Admin:        AdminConfig{Listen: DefaultAdminListen},
		Server:       defaultServer,
		Log:          LogConfig{Format: "text", Level: "info"},
		Reload:       ReloadConfig{Poll: DefaultPoll},
	}
	lines, err := yamlfile.Decode(name, data, c, yamlfile.Options{Expand: yamlfile.ExpandEnv})
	if err != nil {
		return nil, err
	}
	c.file, c.lines = name, lines
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) errAt(path, format string, args ...any) *yamlfile.Error {
	return c.lines.At(c.file, path, fmt.Sprintf(format, args...))
}

// wrapAt reports a library's config error at path.
func (c *Config) wrapAt(path string, err error) *yamlfile.Error {
	e := c.lines.At(c.file, path, err.Error())
	e.Err = err
	return e
}

// validate checks what decoding could not and fills in defaults. The
// limiters' own constructors check the rest when the policies are built
// (see build), so their ranges are written once.
func (c *Config) validate() error {
	if err := checkAddr(c.Listen); err != nil {
		return c.errAt("listen", "%v", err)
	}
	if err := checkAddr(c.Admin.Listen); err != nil {
		return c.errAt("admin.listen", "%v", err)
	}
	if c.DrainTimeout < 0 {
		return c.errAt("drain_timeout", "must be >= 0, got %v", c.DrainTimeout)
	}
	if err := c.validateServer(); err != nil {
		return err
	}
	if c.Reload.Poll < 0 || c.Reload.Poll > 0 && c.Reload.Poll < minPoll {
		// Each poll is an os.Stat: 1ns would spin a core.
		return c.errAt("reload.poll", "must be 0s (no polling) or at least %v, got %v", minPoll, c.Reload.Poll)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		return c.errAt("log.format", "%q: want text or json", c.Log.Format)
	}
	if _, err := parseLevel(c.Log.Level); err != nil {
		return c.errAt("log.level", "%v", err)
	}
	stores := map[string]int{}
	for i := range c.Stores {
		s := &c.Stores[i]
		at := fmt.Sprintf("stores[%d]", i)
		if err := c.validateStore(s, at); err != nil {
			return err
		}
		if j, ok := stores[s.Name]; ok {
			return c.errAt(at+".name", "%q already names stores[%d]", s.Name, j)
		}
		stores[s.Name] = i
	}
	for i, p := range c.ClientIP.TrustedProxies {
		if _, err := parsePrefix(p); err != nil {
			return c.errAt(fmt.Sprintf("client_ip.trusted_proxies[%d]", i), "%v", err)
		}
	}
	switch c.ClientIP.Header {
	case "", "X-Forwarded-For", "Forwarded":
	default:
		return c.errAt("client_ip.header", "%q: want X-Forwarded-For or Forwarded", c.ClientIP.Header)
	}
	if c.ClientIP.IPv6Prefix < 0 || c.ClientIP.IPv6Prefix > 128 {
		return c.errAt("client_ip.ipv6_prefix", "must be within [0, 128], got %d", c.ClientIP.IPv6Prefix)
	}
	policies := map[string]int{}
	for i := range c.Policies {
		p := &c.Policies[i]
		at := fmt.Sprintf("policies[%d]", i)
		if err := c.validatePolicy(p, at, stores); err != nil {
			return err
		}
		if j, ok := policies[p.Name]; ok {
			return c.errAt(at+".name", "%q already names policies[%d]", p.Name, j)
		}
		policies[p.Name] = i
	}
	if len(c.Routes) == 0 {
		return c.errAt("routes", "no routes: the proxy would answer every request 404")
	}
	routes := map[string]int{}
	matches := map[string]int{}
	for i := range c.Routes {
		r := &c.Routes[i]
		at := fmt.Sprintf("routes[%d]", i)
		if err := c.validateRoute(r, at, policies); err != nil {
			return err
		}
		if j, ok := routes[r.Name]; ok {
			return c.errAt(at+".name", "%q already names routes[%d]", r.Name, j)
		}
		routes[r.Name] = i
		m := r.Host + " " + r.PathPrefix + " " + strings.Join(r.Methods, ",")
		if j, ok := matches[m]; ok {
			return c.errAt(at, "matches the same requests as routes[%d] (host, path_prefix, methods): it would never be used", j)
		}
		matches[m] = i
	}
	return nil
}

func (c *Config) validateRoute(r *Route, at string, policies map[string]int) error {
	if r.Name == "" {
		return c.errAt(at+".name", "required")
	}
	if r.PathPrefix == "" {
		r.PathPrefix = "/"
	}
	if !strings.HasPrefix(r.PathPrefix, "/") {
		return c.errAt(at+".path_prefix", "%q must start with /", r.PathPrefix)
	}
	r.Host = strings.ToLower(r.Host)
	if err := checkRouteHost(r.Host); err != nil {
		return c.errAt(at+".host", "%v", err)
	}
	r.Host = strings.TrimSuffix(strings.TrimPrefix(r.Host, "["), "]") // as requestHost reads an IPv6 literal
	for j, m := range r.Methods {
		if m == "" || strings.ToUpper(m) != m || strings.ContainsAny(m, " \t/") {
			return c.errAt(fmt.Sprintf("%s.methods[%d]", at, j), "%q is not an HTTP method (write it in capitals: GET)", m)
		}
	}
	u, err := url.Parse(r.Upstream)
	switch {
	case r.Upstream == "":
		return c.errAt(at+".upstream", "required (e.g. http://127.0.0.1:9000)")
	case err != nil:
		return c.errAt(at+".upstream", "%q does not parse: %v", r.Upstream, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return c.errAt(at+".upstream", "%q: want an http:// or https:// URL", r.Upstream)
	case u.Host == "":
		return c.errAt(at+".upstream", "%q has no host", r.Upstream)
	}
	if r.Policy != "" {
		if _, ok := policies[r.Policy]; !ok {
			return c.errAt(at+".policy", "%q is not the name of a policy", r.Policy)
		}
	}
	if r.Timeout == 0 {
		r.Timeout = DefaultTimeout
	} else if r.Timeout < 0 {
		return c.errAt(at+".timeout", "must be > 0, got %v", r.Timeout)
	}
	if r.StreamAfter == 0 {
		r.StreamAfter = DefaultStreamAfter
	} else if r.StreamAfter < 0 {
		return c.errAt(at+".stream_after", "must be > 0, got %v", r.StreamAfter)
	}
	if r.FlushInterval < -1 {
		return c.errAt(at+".flush_interval", "must be -1 (flush every write), 0 (default) or a positive duration, got %v", r.FlushInterval)
	}
	return nil
}

func (c *Config) validatePolicy(p *Policy, at string, stores map[string]int) error {
	if p.Name == "" {
		return c.errAt(at+".name", "required")
	}
	if len(p.Name) > maxPolicyName {
		// The name is in the keys of a shared store's limits, next to the
		// client's key, under redisstore.MaxKeyLen.
		return c.errAt(at+".name", "%d bytes long: at most %d", len(p.Name), maxPolicyName)
	}
	if strings.ContainsAny(p.Name, "/ ") {
		return c.errAt(at+".name", "%q: no slashes or spaces (it is a path in the admin API)", p.Name)
	}
	if p.Rate == nil && p.Concurrency == nil && p.PerKeyConcurrency == nil {
		return c.errAt(at, "sets no limit: give it rate, concurrency or per_key_concurrency")
	}
	if p.Key == "" {
		p.Key = "client_ip"
	}
	if _, err := parseKey(p.Key); err != nil {
		return c.errAt(at+".key", "%v", err)
	}
	if p.MaxKeys == 0 {
		p.MaxKeys = DefaultMaxKeys
	} else if p.MaxKeys < 1 || p.MaxKeys > maxMaxKeys {
		return c.errAt(at+".max_keys", "must be within [1, %d], got %d", maxMaxKeys, p.MaxKeys)
	}
	if p.MaxWait == 0 {
		p.MaxWait = DefaultMaxWait
	} else if p.MaxWait < 0 {
		return c.errAt(at+".max_wait", "must be > 0, got %v", p.MaxWait)
	}
	if p.MaxWaiting == 0 {
		p.MaxWaiting = DefaultMaxWaiting
	} else if p.MaxWaiting < 1 || p.MaxWaiting > maxMaxKeys {
		return c.errAt(at+".max_waiting", "must be within [1, %d], got %d", maxMaxKeys, p.MaxWaiting)
	}
	if p.MaxWaitingPerKey == 0 {
		p.MaxWaitingPerKey = DefaultMaxWaitingPerKey
	} else if p.MaxWaitingPerKey < 1 || p.MaxWaitingPerKey > maxMaxKeys {
		return c.errAt(at+".max_waiting_per_key", "must be within [1, %d], got %d", maxMaxKeys, p.MaxWaitingPerKey)
	}
	if p.QuotaStatus == 0 {
		p.QuotaStatus = 429
	} else if p.QuotaStatus < 400 || p.QuotaStatus > 599 {
		return c.errAt(at+".quota_status", "must be a 4xx or 5xx status, got %d", p.QuotaStatus)
	}
	if p.CapacityStatus == 0 {
		p.CapacityStatus = 503
	} else if p.CapacityStatus < 400 || p.CapacityStatus > 599 {
		return c.errAt(at+".capacity_status", "must be a 4xx or 5xx status, got %d", p.CapacityStatus)
	}
	if err := c.validateRate(p.Rate, at); err != nil {
		return err
	}
	if err := c.validateShared(p, at, stores); err != nil {
		return err
	}
	if a := p.adaptive(); a != nil {
		if a.Algorithm == "" {
			a.Algorithm = RecommendedAlgorithm
		}
		if _, ok := algorithms[a.Algorithm]; !ok {
			return c.errAt(at+".concurrency.adaptive.algorithm", "%q: want one of %s", a.Algorithm, algorithmNames())
		}
	}
	return nil
}

// validateShared checks that a policy kept in a shared store asks only
// for what the store shares: a token bucket (global or per key) and a
// fixed concurrency limit.
func (c *Config) validateShared(p *Policy, at string, stores map[string]int) error {
	if p.Store == "" {
		p.Store = "memory"
	}
	if p.Store == "memory" {
		return nil
	}
	if _, ok := stores[p.Store]; !ok {
		return c.errAt(at+".store", "%q is not the name of a store (memory, or one of stores[].name)", p.Store)
	}
	if p.PerKeyConcurrency != nil {
		return c.errAt(at+".per_key_concurrency", "is not shared through a store: drop it or store: memory")
	}
	if cs := p.Concurrency; cs != nil {
		switch {
		case cs.Adaptive != nil:
			return c.errAt(at+".concurrency.adaptive", "an adaptive limit is found by each proxy and is not shared through a store: drop it or store: memory")
		case cs.MaxQueue != 0:
			return c.errAt(at+".concurrency.max_queue", "a shared concurrency limit has no queue (waiters poll the store until max_wait): drop it")
		case cs.Discipline != concurrency.FIFO:
			return c.errAt(at+".concurrency.discipline", "a shared concurrency limit has no queue discipline: drop it")
		}
	}
	return nil
}

func (p *Policy) adaptive() *AdaptiveSpec {
	if p.Concurrency == nil {
		return nil
	}
	return p.Concurrency.Adaptive
}

func checkAddr(a string) error {
	if a == "" {
		return fmt.Errorf("required (host:port, e.g. 127.0.0.1:8080)")
	}
	if !strings.Contains(a, ":") {
		return fmt.Errorf("%q: want host:port", a)
	}
	return nil
}

// parsePrefix accepts a CIDR prefix or a single address.
func parsePrefix(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is neither a CIDR prefix (10.0.0.0/8) nor an address", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}
