package netlimit

import (
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/rate"
)

// invalid is the error for a bad field: a *sluice.ConfigError, which
// matches sluice.ErrInvalidConfig.
func invalid(field string, v any, allowed string) error {
	return sluice.NewConfigError("netlimit", field, v, allowed)
}

// The answers written to a rejected connection when Config.Reject is nil:
// complete HTTP/1.1 responses that tell the client the connection is over.
// As httplimit answers, a client over a rate or quota (sluice.ErrQuota:
// AcceptRate) reads 429, and a full server (a concurrency limit, its queue,
// MaxPending) 503: try later, or another server. A load balancer tells the
// two apart.
const (
	defaultReject     = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
	defaultQuotaReply = "HTTP/1.1 429 Too Many Requests\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
)

// Defaults for the Config fields whose zero value means "default".
//
// They are sized for a burst: a rejected connection must be answered
// within RejectTimeout of its accept, so the rejecters must keep pace with
// the connections rejected meanwhile. With 4 rejecters and a queue of 128,
// a burst of 500 connections on loopback left some closed with a reset
// instead of the answer; 32 rejecters and a queue of 1024 answered every one
// (TestBurstAnsweredWithDefaults). A rejecter is a parked goroutine (a few
// KiB) and a queue slot a few words, so the defaults cost little memory.
const (
	// defaultRejectTimeout covers the wait for a rejecter, for the
	// client's request and for the client to read the answer and hang up:
	// net/http's own delay before it closes a connection it answered with
	// an error (its rstAvoidanceDelay, 500ms) plus as much again for the
	// queue.
	defaultRejectTimeout = time.Second
	defaultMaxPending    = 1024
	defaultRejecters     = 32
	defaultRejectQueue   = 1024
)

// Upper bounds on the fields that size what NewListener allocates up
// front: a goroutine per rejecter and a channel slot per queued rejection.
// A value from a config file beyond them would exhaust memory (or make
// make() panic) rather than mean anything.
const (
	MaxRejecters   = 1024
	MaxRejectQueue = 1 << 16
)

// Config configures a Listener. Every field's zero value is a usable default.
type Config struct {
	// Limiter admits connections: a connection holds one of its permits
	// from the moment Accept returns it until it is closed. Typically a
	// *concurrency.Limiter, whose Limit is the number of connections
	// served at once and whose MaxQueue, Discipline and MaxWait govern the
	// connections that wait for one. Any sluice.Limiter works (a
	// rate.Bucket, sluice.All of several). Default nil: no limit.
	Limiter sluice.Limiter
	// MaxPending caps the connections waiting in Limiter.Acquire at once
	// (each waits in its own goroutine, and once admitted, waits there for
	// Accept); a connection beyond it is rejected with
	// sluice.ReasonQueueFull. Size the queue with the limiter's own
	// MaxQueue; this is the backstop for limiters whose waits are bounded
	// by time rather than count. Default defaultMaxPending (1024); must not
	// be negative.
	MaxPending int

	// AcceptRate, if not nil, limits the rate at which connections are
	// taken from the inner listener. Default nil: no rate limit.
	//
	// Give the bucket a Burst of a few tokens (the rate × 10 ms or more).
	// With Burst 1, whenever the accept loop runs late by more than one
	// token's interval (a busy machine, a GC pause), the tokens that
	// accrued meanwhile are capped away: on a loaded 2-core machine, 1000
	// connections/s against 300/s and 600/s buckets were served at 285/s
	// and 542/s with Burst 1, at 297/s and 594/s with Burst 5.
	AcceptRate *rate.Bucket
	// RejectOverRate makes a connection that finds no AcceptRate token
	// rejected at once (sluice.ReasonRate). By default (false) the accept
	// loop waits for the token, leaving later connections in the kernel's
	// backlog, which is seed 004's queueing token bucket. A rejecting
	// bucket wants a Burst of a few tokens: with Burst 1 the tokens that
	// accrue between two arrivals are capped away, so 1000 arrivals/s
	// evenly spaced against a 300/s bucket get 250/s through.
	RejectOverRate bool

	// Reject is written to every rejected connection before it is closed.
	// Default (nil) a bare HTTP 503 ("HTTP/1.1 503 Service Unavailable",
	// Connection: close, Content-Length: 0), or 429 ("Too Many Requests")
	// when the rejection is a quota's (sluice.ErrQuota: AcceptRate), as
	// httplimit answers. An empty non-nil slice writes nothing: the
	// connection is just closed.
	Reject []byte
	// ServerSpeaksFirst makes a rejecter write Reject as soon as it takes
	// the connection, for protocols where the server talks first (SMTP,
	// FTP). By default (false: the client talks first, as in HTTP) it
	// first waits for the client's first bytes, its request: an HTTP
	// client treats a response that arrives before it has sent its
	// request as a broken connection, not as a 503.
	ServerSpeaksFirst bool
	// RejectTimeout bounds the time from a rejected connection's accept
	// to its close: waiting for a rejecter, then for the client's request,
	// writing Reject, and reading what the client still sends until it
	// closes its side, so that closing does not reset the connection
	// before the client has read the answer. A connection that waited for
	// a rejecter past it is closed with no answer (see
	// Listener.Unanswered): an answer that late is no use. Default 1s;
	// must not be negative.
	RejectTimeout time.Duration
	// Rejecters is the number of goroutines that answer rejected
	// connections. Default 32; at most MaxRejecters.
	Rejecters int
	// RejectQueue is the number of rejected connections that may wait for
	// a rejecter; beyond it a rejected connection is closed with no
	// answer (see Listener.Unanswered). Default 1024;
	// at most MaxRejectQueue.
	RejectQueue int
}

// withDefaults validates c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	switch {
	case c.MaxPending < 0:
		return c, invalid("Config.MaxPending", c.MaxPending, "must be >= 0 (0: "+strconv.Itoa(defaultMaxPending)+")")
	case c.RejectTimeout < 0:
		return c, invalid("Config.RejectTimeout", c.RejectTimeout, "must be >= 0 (0: "+defaultRejectTimeout.String()+")")
	case c.Rejecters < 0 || c.Rejecters > MaxRejecters:
		return c, invalid("Config.Rejecters", c.Rejecters, "must be 0 (default "+strconv.Itoa(defaultRejecters)+") to "+strconv.Itoa(MaxRejecters))
	case c.RejectQueue < 0 || c.RejectQueue > MaxRejectQueue:
		return c, invalid("Config.RejectQueue", c.RejectQueue, "must be 0 (default "+strconv.Itoa(defaultRejectQueue)+") to "+strconv.Itoa(MaxRejectQueue))
	case c.RejectOverRate && c.AcceptRate == nil:
		return c, invalid("Config.RejectOverRate", true, "needs AcceptRate, which is nil")
	}
	if c.MaxPending == 0 {
		c.MaxPending = defaultMaxPending
	}
	if c.RejectTimeout == 0 {
		c.RejectTimeout = defaultRejectTimeout
	}
	if c.Rejecters == 0 {
		c.Rejecters = defaultRejecters
	}
	if c.RejectQueue == 0 {
		c.RejectQueue = defaultRejectQueue
	}
	if c.Reject != nil { // nil: the default answers, chosen per rejection
		c.Reject = append([]byte{}, c.Reject...) // the caller may reuse theirs
	}
	return c, nil
}
