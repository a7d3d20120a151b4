package proxy

import (
	"net"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/netlimit"
)

// ServerConfig bounds what clients' connections may hold: without it an
// idle keep-alive client, or one that sends its headers a byte a minute,
// keeps a connection (a file descriptor, a goroutine) for ever, and enough
// of them exhaust the process's descriptors.
type ServerConfig struct {
	// ReadHeaderTimeout bounds the reading of a request's headers; 0:
	// none.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout" json:"read_header_timeout"`
	// ReadTimeout bounds the reading of a whole request, body included;
	// 0 (the default): none, since a proxied upload may take long.
	ReadTimeout time.Duration `yaml:"read_timeout" json:"read_timeout"`
	// IdleTimeout is how long a keep-alive connection may wait for its
	// next request; 0: none.
	IdleTimeout time.Duration `yaml:"idle_timeout" json:"idle_timeout"`
	// MaxConnections caps the client connections open at once; one more
	// is answered 503 and closed.
	MaxConnections int `yaml:"max_connections" json:"max_connections"`
}

// Defaults of ServerConfig.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxConnections    = 10000
)

var defaultServer = ServerConfig{
	ReadHeaderTimeout: DefaultReadHeaderTimeout,
	IdleTimeout:       DefaultIdleTimeout,
	MaxConnections:    DefaultMaxConnections,
}

func (c *Config) validateServer() error {
	s := c.Server
	switch {
	case s.ReadHeaderTimeout < 0:
		return c.errAt("server.read_header_timeout", "must be >= 0 (0: none), got %v", s.ReadHeaderTimeout)
	case s.ReadTimeout < 0:
		return c.errAt("server.read_timeout", "must be >= 0 (0: none), got %v", s.ReadTimeout)
	case s.IdleTimeout < 0:
		return c.errAt("server.idle_timeout", "must be >= 0 (0: none), got %v", s.IdleTimeout)
	case s.MaxConnections < 1 || s.MaxConnections > concurrency.MaxLimit:
		return c.errAt("server.max_connections", "must be within [1, %d], got %d", concurrency.MaxLimit, s.MaxConnections)
	}
	return nil
}

// overConnections answers a connection past server.max_connections: the
// proxy is over capacity, as a full concurrency limit answers.
var overConnections = func() []byte {
	const body = "over capacity: too many connections open\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()

// limitConns wraps the proxy's listener so that at most max connections
// are open at once; the ones beyond are answered 503 (netlimit reads the
// request first, so the client sees the answer) and closed, rather than
// left in the kernel's backlog where a client cannot tell them from a
// dead proxy.
func limitConns(ln net.Listener, max int) (net.Listener, error) {
	lim, err := concurrency.New(concurrency.Config{Limit: max})
	if err != nil {
		return nil, err
	}
	return netlimit.NewListener(ln, netlimit.Config{Limiter: lim, Reject: overConnections})
}
