package proxy

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/cmd/sluice/internal/yamlfile"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/httplimit"
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

// httplimit is the client_ip section as httplimit reads it; validate
// checked it.
func (ip ClientIPConfig) httplimit() httplimit.IPConfig {
	return httplimit.IPConfig{TrustedProxies: ip.TrustedProxies, ProxyHeader: ip.Header, IPv6Prefix: ip.IPv6Prefix}
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
	// OnClientGone is what a request whose client left before the
	// upstream's answer does: wait for it (its limits count it until the
	// upstream is done) or cancel (see gone.go).
	OnClientGone string `yaml:"on_client_gone" json:"on_client_gone"`
	// DeadlineHeader names a request header in which clients send their
	// timeout (deadline.go); "": none.
	DeadlineHeader string `yaml:"deadline_header" json:"deadline_header"`
}

// Policy is the limits a request passes before it goes upstream: every one
// that is set, all or nothing.
type Policy struct {
	Name              string          `yaml:"name" json:"name"`
	Key               string          `yaml:"key" json:"key"`
	Store             string          `yaml:"store" json:"store"`
	MaxKeys           int             `yaml:"max_keys" json:"max_keys"`
	Rate              *RateSpec       `yaml:"rate,omitempty" json:"rate,omitempty"`
	Concurrency       *ConcSpec       `yaml:"concurrency,omitempty" json:"concurrency,omitempty"`
	PerKeyConcurrency *PerKeyConcSpec `yaml:"per_key_concurrency,omitempty" json:"per_key_concurrency,omitempty"`
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
	Limit    int           `yaml:"limit" json:"limit"`
	MaxQueue int           `yaml:"max_queue" json:"max_queue"`
	MaxWait  time.Duration `yaml:"max_wait" json:"max_wait"`
	// MaxWaitServices bounds the wait in the queue to that many mean
	// service times once the queue stands
	// (concurrency.Config.MaxWaitServices); 0: none.
	MaxWaitServices float64                `yaml:"max_wait_services" json:"max_wait_services"`
	Discipline      concurrency.Discipline `yaml:"discipline" json:"discipline"`
	Adaptive        *AdaptiveSpec          `yaml:"adaptive,omitempty" json:"adaptive,omitempty"`
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

// wrapAt reports a library's config error at path. When the field it
// names was written in the file (Config.MaxQueue is path's max_queue), it
// is reported at that key, in the file's words: "must be ..., got -1",
// not the Go field name, which a YAML user never wrote.
func (c *Config) wrapAt(path string, err error) *yamlfile.Error {
	msg := err.Error()
	var ce *sluice.ConfigError
	if errors.As(err, &ce) {
		field := ce.Field[strings.LastIndexByte(ce.Field, '.')+1:]
		if key := snakeCase(field); key != "" {
			if _, exact := c.lines.Line(path + "." + key); exact {
				path, msg = path+"."+key, ce.Allowed
				if ce.Value != nil {
					msg += fmt.Sprintf(", got %v", ce.Value)
				}
			}
		}
	}
	e := c.lines.At(c.file, path, msg)
	e.Err = err
	return e
}

// snakeCase is a Go field name's YAML key (MaxWaitServices is
// max_wait_services), or "" for anything not a plain field name.
func snakeCase(field string) string {
	var b strings.Builder
	for i, r := range field {
		switch {
		case r >= 'A' && r <= 'Z':
			if i > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(r - 'A' + 'a')
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9' && i > 0:
			b.WriteRune(r)
		default:
			return ""
		}
	}
	return b.String()
}
