package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice"
)

// Defaults of Config.
const (
	DefaultTimeout          = 5 * time.Millisecond
	DefaultBreakerThreshold = 3
	DefaultBreakerCooldown  = 500 * time.Millisecond
	DefaultMaxBatch         = 128
	DefaultPipelines        = 1
)

// Errors of a store call. A limiter never returns them: it applies its
// failure policy and counts them in StoreStats.
var (
	ErrTimeout     = errors.New("redisstore: store call timed out")
	ErrBreakerOpen = errors.New("redisstore: circuit breaker open")
	ErrClosed      = errors.New("redisstore: store closed")
	ErrReply       = errors.New("redisstore: unexpected reply from Redis")
)

// errUnsent is a timeout that struck while the call still waited for a
// pipeline: it never reached Redis and never will (the flushers skip it).
// It matches ErrTimeout; the leases tell it apart (see sentMaybe).
var errUnsent = fmt.Errorf("%w before it was sent", ErrTimeout)

// sentMaybe reports whether a failed call may have reached Redis, and so
// may have run: a timeout after sending, a lost answer, an error reply. A
// call refused by the breaker, one that timed out before a pipeline took
// it, or one whose connection could not be opened did not. After Close
// nothing can undo a call, so a closed store counts as not sent.
func sentMaybe(err error) bool {
	var op *net.OpError
	switch {
	case errors.Is(err, ErrBreakerOpen), errors.Is(err, ErrClosed), err == errUnsent,
		errors.Is(err, redis.ErrPoolTimeout), errors.As(err, &op) && op.Op == "dial":
		return false
	}
	return true
}

// Config configures a Store. The zero value works: every field has a
// default.
type Config struct {
	// Timeout bounds every decision that goes to Redis, queueing for a
	// pipeline included: the failure policy has answered by then, unless
	// the machine is too loaded to run the caller in time. A call
	// gives up on Redis min(Timeout/2, 2 ms) earlier, the margin for Go's
	// timers, which fire up to about a millisecond late (see giveUp): with
	// the default 5 ms, Redis has 3 ms to answer. For a client given to
	// New, go-redis honours the deadline on its sockets only with
	// ContextTimeoutEnabled (Open sets it). Default DefaultTimeout (5 ms);
	// 100 µs to 10 s.
	Timeout time.Duration
	// BreakerThreshold is the number of consecutive failed round trips
	// that open the circuit breaker. A round trip counts once however
	// many calls it carried (one slow pipeline is one sign of trouble,
	// not a hundred), and a call that timed out before it was sent does
	// not count: the round trip that held it up does. Default 3; 1 to
	// 1000.
	BreakerThreshold int
	// BreakerCooldown is how long the breaker stays open before one probe
	// call tries Redis again. Default 500 ms; 1 ms to 1 min.
	BreakerCooldown time.Duration
	// MaxBatch is the most calls sent in one pipeline. Default 128;
	// 1 (no pipelining) to 10,000.
	MaxBatch int
	// BatchWindow, if > 0, is how long a pipeline waits for more calls
	// once it has at least two (a lone call never waits); at most 1 ms.
	// Default 0: no wait. A pipeline takes what is queued when it starts,
	// and the calls that come during its round trip make the next one,
	// which batches as much as there is load; a window only added latency
	// and CPU in the benchmarks (bench/redis), Go timers of microseconds
	// firing late.
	BatchWindow time.Duration
	// Pipelines is the number of pipelines in flight at once, besides a
	// call sent directly when nothing else is under way. Default 1: the
	// calls that queue during one round trip all go in the next, which is
	// what costs Redis least per decision; more pipelines make smaller
	// batches (measured: half the decisions per second at 4 on 2 cores).
	// On a Cluster a pipeline waits for its slowest node: more pipelines
	// keep one slow node from holding up the decisions for the others.
	// 1 to 64.
	Pipelines int
	// Heartbeat, if > 0, is how often the store announces its replica in
	// the heartbeat key and counts the live ones (Replicas), for the
	// FailLocal policy's limit/N. 0: no heartbeat. 10 ms to 1 min.
	Heartbeat time.Duration
	// HeartbeatKey is the sorted set of live replicas. Default
	// "{sluice}:replicas".
	HeartbeatKey string
}

func (c *Config) fill() error {
	if err := durField("Config.Timeout", &c.Timeout, DefaultTimeout, 100*time.Microsecond, 10*time.Second); err != nil {
		return err
	}
	if err := intField("Config.BreakerThreshold", &c.BreakerThreshold, DefaultBreakerThreshold, 1, 1000); err != nil {
		return err
	}
	if err := durField("Config.BreakerCooldown", &c.BreakerCooldown, DefaultBreakerCooldown, time.Millisecond, time.Minute); err != nil {
		return err
	}
	if err := intField("Config.MaxBatch", &c.MaxBatch, DefaultMaxBatch, 1, 10000); err != nil {
		return err
	}
	if c.BatchWindow > time.Millisecond {
		return sluice.NewConfigError("redisstore", "Config.BatchWindow", c.BatchWindow, "must be at most 1ms (0 or negative: no wait)")
	}
	if err := intField("Config.Pipelines", &c.Pipelines, DefaultPipelines, 1, 64); err != nil {
		return err
	}
	if c.Heartbeat != 0 && (c.Heartbeat < 10*time.Millisecond || c.Heartbeat > time.Minute) {
		return sluice.NewConfigError("redisstore", "Config.Heartbeat", c.Heartbeat, "must be 0 (off) or between 10ms and 1m")
	}
	if c.HeartbeatKey == "" {
		c.HeartbeatKey = "{sluice}:replicas"
	}
	return checkKey("Config.HeartbeatKey", c.HeartbeatKey)
}

// Store is a connection to Redis shared by limiters: it runs their scripts
// with a per-call timeout, pipelines concurrent calls into one round trip,
// and keeps a circuit breaker and the metrics. Safe for concurrent use.
type Store struct {
	client redis.UniversalClient
	owned  bool
	cfg    Config
	br     *breaker
	queue  chan *call
	quit   chan struct{}
	wg     sync.WaitGroup
	start  time.Time
	closed atomic.Bool
	// pending counts the calls under way: a call that finds none runs
	// on its caller's goroutine.
	pending atomic.Int64

	replicas   atomic.Int64
	rtt        hist
	calls      atomic.Uint64
	errs       atomic.Uint64
	timeouts   atomic.Uint64
	shorted    atomic.Uint64 // calls refused by the open breaker
	roundTrips atomic.Uint64
	tripIDs    atomic.Uint64 // numbers the round trips for the breaker
	crossSlot  atomic.Uint64
	// merge: decisions may share one script call (a single node); off
	// for good once Redis refuses one with CROSSSLOT.
	merge atomic.Bool
}

// New returns a Store over client (single node, Sentinel or Cluster).
// The caller keeps ownership of client: Close does not close it.
func New(client redis.UniversalClient, cfg Config) (*Store, error) {
	if client == nil {
		return nil, sluice.NewConfigError("redisstore", "client", nil, "must not be nil")
	}
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	s := &Store{
		client: client,
		cfg:    cfg,
		br:     newBreaker(cfg.BreakerThreshold, cfg.BreakerCooldown),
		queue:  make(chan *call, cfg.MaxBatch*(cfg.Pipelines+1)),
		quit:   make(chan struct{}),
		start:  time.Now(),
	}
	_, single := client.(*redis.Client) // not a Cluster nor a Ring: every key on one server
	s.merge.Store(single)
	s.replicas.Store(1)
	for range cfg.Pipelines {
		s.wg.Add(1)
		go s.flusher()
	}
	if cfg.Heartbeat > 0 {
		s.wg.Add(1)
		go s.heartbeat()
	}
	return s, nil
}

// Close stops the store's goroutines, and closes the client if the store
// opened it (Open). Calls after Close fail with ErrClosed.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(s.quit)
	s.wg.Wait()
	if s.owned {
		return s.client.Close()
	}
	return nil
}

// Client is the store's Redis client.
func (s *Store) Client() redis.UniversalClient { return s.client }

// Timeout is the per-call timeout.
func (s *Store) Timeout() time.Duration { return s.cfg.Timeout }

// now is monotonic nanoseconds since the store started: the breaker's and
// the local caches' clock (never Redis's: Redis keeps its own).
func (s *Store) now() int64 { return int64(time.Since(s.start)) }

// StoreStats is a snapshot of a store's counters, for metrics.
type StoreStats struct {
	Calls          uint64 // calls that went to Redis (sent, or being sent)
	Errors         uint64 // calls that failed (timeouts included)
	Timeouts       uint64 // calls that failed by the per-call timeout
	BreakerRejects uint64 // calls refused at once by the open breaker
	BreakerTrips   uint64 // times the breaker opened
	Breaker        BreakerState
	RoundTrips     uint64 // round trips to Redis: direct calls and pipelines
	Replicas       int    // live replicas by the heartbeat (1 without)
	// CrossSlot counts merged script calls that Redis refused with
	// CROSSSLOT (a Cluster node or a proxy behind a single address): the
	// store resends their decisions one script call each and stops
	// merging at the first.
	CrossSlot uint64
	// RoundTrip is the histogram of the durations of the calls that went
	// to Redis (Calls) as their callers saw them (queueing for the
	// pipeline included), and RoundTripSum their sum.
	RoundTrip    []HistBucket
	RoundTripSum time.Duration
}

// Stats returns the store's counters.
func (s *Store) Stats() StoreStats {
	b, sum := s.rtt.snapshot()
	return StoreStats{
		Calls: s.calls.Load(), Errors: s.errs.Load(), Timeouts: s.timeouts.Load(),
		BreakerRejects: s.shorted.Load(), BreakerTrips: s.br.trips.Load(), Breaker: s.br.current(),
		RoundTrips: s.roundTrips.Load(), Replicas: s.Replicas(), CrossSlot: s.crossSlot.Load(), RoundTrip: b, RoundTripSum: sum,
	}
}

// Replicas is the number of live replicas by the heartbeat, the largest of
// its last 3 counts, at least 1 (1 without a heartbeat).
func (s *Store) Replicas() int { return int(max(1, s.replicas.Load())) }

// eval runs script with keys and args in one round trip (alone or in a
// pipeline) and returns its reply, within the store's timeout.
func (s *Store) eval(script *redis.Script, keys []string, args ...any) (any, error) {
	c := getCall(script)
	c.keys, c.args = keys, args
	return s.do(c)
}

// do runs c and returns its reply. It never blocks much past Timeout,
// whatever Redis does: a queued caller stops waiting and the pipeline's
// late answer is dropped; a caller on the direct path gives go-redis a
// deadline with room to unwind. c goes back to the pool when nothing else
// holds it.
func (s *Store) do(c *call) (any, error) {
	if s.closed.Load() {
		putCall(c)
		return nil, ErrClosed
	}
	t0 := s.now()
	if !s.br.allow(t0) {
		putCall(c)
		s.shorted.Add(1)
		return nil, ErrBreakerOpen
	}
	c.deadline = t0 + int64(s.cfg.Timeout)
	var r result
	var trip uint64 // the round trip that carried c; 0: it never left
	reuse := true
	if s.pending.Add(1) == 1 {
		// Nothing else under way: run on the caller's goroutine, one
		// round trip with no hand-off (a lone caller pays nothing for
		// pipelining). Calls that come meanwhile go to the flusher, which
		// sends all it finds queued in one round trip.
		s.roundTrips.Add(1)
		trip = s.tripIDs.Add(1)
		g := s.giveUp(c)
		c.ctx.arm(s.at(g), time.Duration(g-t0))
		r.val, r.err = s.run(c.ctx, c)
		reuse = c.ctx.disarm()
	} else {
		r, reuse = s.pipelined(c, t0)
		trip = c.trip.Load()
		if r.err == errUnsent || r.err == ErrClosed && c.state.Load() != callTaken {
			trip = 0
		}
	}
	s.pending.Add(-1)
	if reuse {
		putCall(c)
	}
	t1 := s.now()
	if trip != 0 {
		s.calls.Add(1)
		s.rtt.record(time.Duration(t1 - t0))
	}
	if r.err != nil && !errors.Is(r.err, redis.Nil) {
		s.errs.Add(1)
		if errors.Is(r.err, ErrTimeout) || errors.Is(r.err, context.DeadlineExceeded) || isTimeout(r.err) {
			s.timeouts.Add(1)
			if r.err != errUnsent {
				r.err = ErrTimeout
			}
		}
		// Redis's answer about one call (a key of another type) says Redis
		// is up: counted a failure, three in a row opened the breaker
		// for every key.
		s.br.done(t1, answered(r.err), trip)
		return nil, r.err
	}
	s.br.done(t1, true, trip)
	return r.val, nil
}

// answered reports whether err is Redis's own answer about one call (a key
// holding another type, a script error): Redis is up. A refusal every call
// would get (the dataset loading, a read-only replica, a master or cluster
// down, out of memory, a script hogging the server, too many clients) is
// not.
func answered(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) || redis.IsLoadingError(err) || redis.IsReadOnlyError(err) ||
		redis.IsMasterDownError(err) || redis.IsClusterDownError(err) || redis.IsTryAgainError(err) ||
		redis.IsMaxClientsError(err) {
		return false
	}
	for _, p := range []string{"OOM ", "BUSY ", "MISCONF ", "NOREPLICAS "} {
		if strings.HasPrefix(re.Error(), p) {
			return false
		}
	}
	return true
}

// isTimeout reports a network timeout (a socket deadline).
func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}
