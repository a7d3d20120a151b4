package redisstore

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice"
)

// Defaults and bounds of ConcurrencyConfig.
const (
	DefaultLeaseTTL = 10 * time.Second
	DefaultPollMin  = time.Millisecond
	DefaultPollMax  = 20 * time.Millisecond
	MaxLimit        = 1000000
)

// The lease scripts keep one sorted set per limit: a member per lease,
// scored by its expiry in ms on Redis's clock. Every script first drops
// the expired members, so a crashed holder's leases stop counting once
// their TTL has passed, without any sweeper.
var (
	// KEYS[1] the set; ARGV limit, ttl ms, lease id.
	// Reply {acquired, held, ms until the earliest lease expires}.
	acquireScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local n = redis.call('ZCARD', KEYS[1])
if n < limit then
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[3])
  if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
  return {1, n + 1, 0}
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local wait = 0
if first[2] then wait = math.max(0, tonumber(first[2]) - now) end
return {0, n, wait}
`)
	// KEYS[1] the set; ARGV ttl ms, then lease ids. Renews the leases that
	// still exist in one ZADD XX (a loop in C: a Lua call per lease cost
	// 2.2 µs, so that a few thousand leases outlasted a decision's
	// timeout); looks up one by one, only when some were missing, those
	// that had gone (expired while their holder was slow to renew, or lost
	// by Redis: a flush, a restart without persistence, a failover to a
	// replica that had not got them), adds them back, since their work
	// still runs, and replies with their positions (1-based). The set may
	// then hold more than the limit: the acquires admit no one until it is
	// under it again.
	renewScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local scored = {}
for i = 2, #ARGV do
  scored[#scored + 1] = now + ttl
  scored[#scored + 1] = ARGV[i]
end
local changed = redis.call('ZADD', KEYS[1], 'XX', 'CH', unpack(scored))
local lost, back = {}, {}
if changed < #ARGV - 1 then
  for i = 2, #ARGV do
    if not redis.call('ZSCORE', KEYS[1], ARGV[i]) then
      lost[#lost + 1] = i - 1
      back[#back + 1] = now + ttl
      back[#back + 1] = ARGV[i]
    end
  end
  if #back > 0 then redis.call('ZADD', KEYS[1], unpack(back)) end
end
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return lost
`)
	// KEYS[1] the set; ARGV lease ids (one, or a batch of orphans).
	releaseScript = redis.NewScript(`return redis.call('ZREM', KEYS[1], unpack(ARGV))`)
)

// Orphans: at most maxOrphans remembered, removed at most orphanBatch per
// renewal in one ZREM. A batch stays far below Lua's unpack limit (~8000),
// as does a renewal's chunk of renewChunk leases (two values each).
const (
	maxOrphans  = 10000
	orphanBatch = 1000
	renewChunk  = 250
	// renewParallel renewal calls are under way at once.
	renewParallel = 16
)

// ConcurrencyConfig configures a Concurrency limiter, or a
// KeyedConcurrency (a limit per key).
type ConcurrencyConfig struct {
	// Key names the shared limit; the set lives at "sluice:conc:{Key}"
	// (one Cluster slot). For a KeyedConcurrency it names the family of
	// limits, and key k's set lives at "sluice:conc:Key:{k}". Required, at
	// most 1,000 bytes.
	Key string
	// Limit is the most leases held at once by all replicas together (per
	// key, for a KeyedConcurrency): 1 to MaxLimit. Required.
	Limit int
	// TTL is a lease's life without renewal: a crashed holder's slot comes
	// back after it. The limiter renews its leases every TTL/3. Default
	// DefaultLeaseTTL (10 s); 100 ms to 1 h.
	TTL time.Duration
	// MaxWait bounds how long Acquire waits for a slot; past it the caller
	// is rejected with ReasonQueueTimeout. 0: only the context bounds it.
	MaxWait time.Duration
	// PollMin and PollMax bound the wait between two tries of a waiting
	// Acquire: it starts at PollMin and doubles up to PollMax, each wait
	// drawn uniformly from [d/2, d] so that waiters spread out. Defaults
	// 1 ms and 20 ms; 100 µs to 1 s.
	PollMin, PollMax time.Duration
	// Failure is what a decision does when Redis cannot answer in time.
	// Default FailOpen.
	Failure Failure
	// Replicas is the N of FailLocal's ceil(Limit/N). 0: the store's
	// heartbeat count.
	Replicas int
	// MaxKeys caps the keys of a KeyedConcurrency's FailLocal limiter in
	// the process (keys in flight are never evicted). Default
	// DefaultMaxKeys. Unused by Concurrency.
	MaxKeys int
}

func (cfg *ConcurrencyConfig) check() error {
	if cfg.Key == "" {
		return sluice.NewConfigError("redisstore", "ConcurrencyConfig.Key", nil, "required")
	}
	if len(cfg.Key) > MaxKeyLen-24 {
		return sluice.NewConfigError("redisstore", "ConcurrencyConfig.Key", len(cfg.Key), "key length must be at most 1000 bytes")
	}
	if cfg.Limit < 1 || cfg.Limit > MaxLimit {
		return sluice.NewConfigError("redisstore", "ConcurrencyConfig.Limit", cfg.Limit, "must be between 1 and 1000000")
	}
	if err := durField("ConcurrencyConfig.TTL", &cfg.TTL, DefaultLeaseTTL, 100*time.Millisecond, time.Hour); err != nil {
		return err
	}
	if cfg.MaxWait < 0 {
		return sluice.NewConfigError("redisstore", "ConcurrencyConfig.MaxWait", cfg.MaxWait, "must be >= 0")
	}
	if err := durField("ConcurrencyConfig.PollMin", &cfg.PollMin, DefaultPollMin, 100*time.Microsecond, time.Second); err != nil {
		return err
	}
	if err := durField("ConcurrencyConfig.PollMax", &cfg.PollMax, max(DefaultPollMax, cfg.PollMin), cfg.PollMin, time.Second); err != nil {
		return err
	}
	if err := cfg.Failure.check(); err != nil {
		return err
	}
	if cfg.Replicas < 0 || cfg.Replicas > 10000 {
		return sluice.NewConfigError("redisstore", "ConcurrencyConfig.Replicas", cfg.Replicas, "must be between 0 and 10000")
	}
	return intField("ConcurrencyConfig.MaxKeys", &cfg.MaxKeys, DefaultMaxKeys, 1, 1e7)
}

// leases is what Concurrency and KeyedConcurrency share: the leases this
// replica holds, in Redis sorted sets (one per limit), acquired by one
// script, renewed together every TTL/3 by one goroutine, and the orphans
// it still has to remove. A permit FailLocal admits is a lease too, held
// with its local permit and added to Redis by the first renewal Redis
// answers. Its Release and Cancel end a lease: it is the sluice.Releaser
// of their permits.
type leases struct {
	s     *Store
	cfg   ConcurrencyConfig
	ttlMs int64
	id    string // replica prefix of lease ids

	mu       sync.Mutex
	seq      uint64
	held     map[uint64]lease         // token → lease
	local    map[uint64]sluice.Permit // token → FailLocal's permit, for the leases it admitted
	perSet   map[string]int           // leases admitted by Redis held in each set
	adopted  map[string]*adoption
	orphans  []lease // leases maybe in Redis that no permit holds: removed by the renewer
	lost     uint64  // leases a renewal found gone and added back
	renewals uint64  // renewal script calls Redis answered

	c    counters
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

// lease is one lease: its set and its member; pending while it is one
// FailLocal admitted that no call has tried to add to Redis yet (its
// release has nothing to remove there).
type lease struct {
	set, id string
	pending bool
}

// adoption is the permits of a set's local limiter lc that stand for the
// leases this replica holds in the set (see adopt). Only FailLocal's
// decisions make one: while Redis answers, a lease costs a count in perSet.
type adoption struct {
	lc      *localConc
	permits []sluice.Permit
}

func (l *leases) start(s *Store, cfg ConcurrencyConfig) {
	l.s, l.cfg, l.ttlMs, l.id = s, cfg, cfg.TTL.Milliseconds(), newID()
	l.held = make(map[uint64]lease)
	l.local = make(map[uint64]sluice.Permit)
	l.perSet = make(map[string]int)
	l.adopted = make(map[string]*adoption)
	l.quit, l.done = make(chan struct{}), make(chan struct{})
	go l.renewer()
}

// Close stops renewing the leases; those still held expire after TTL
// unless released. It does not close the store.
func (l *leases) Close() {
	l.once.Do(func() { close(l.quit); <-l.done })
}

// acquire takes a lease in set, polling while wait and the set is full;
// local is the failure policy's limiter, deciding under the context it is
// given (see waitLocal).
func (l *leases) acquire(ctx context.Context, wait bool, set string, local func(context.Context) (sluice.Permit, error)) (sluice.Permit, error) {
	var deadline <-chan time.Time
	var maxAt time.Time // when MaxWait ends; zero: nothing but ctx bounds the wait
	if wait && l.cfg.MaxWait > 0 {
		maxAt = time.Now().Add(l.cfg.MaxWait)
		t := time.NewTimer(l.cfg.MaxWait)
		defer t.Stop()
		deadline = t.C
	}
	keys := []string{set}
	poll := l.cfg.PollMin
	for {
		l.mu.Lock()
		l.seq++
		tok := l.seq
		l.mu.Unlock()
		ls := lease{set: set, id: l.id + ":" + strconv.FormatUint(tok, 36)}
		v, err := l.s.eval(acquireScript, keys, l.cfg.Limit, l.ttlMs, ls.id)
		var a [3]int64
		if err == nil {
			if err = parseInts(v, a[:]); err != nil {
				l.orphan(ls) // Redis answered: the script ran
			}
		} else if sentMaybe(err) {
			l.orphan(ls)
		}
		if err != nil {
			return l.c.fail(l.cfg.Failure, l.s.cfg.BreakerCooldown, func() (sluice.Permit, error) {
				p, err := waitLocal(ctx, maxAt, local)
				if err != nil {
					return p, err
				}
				return l.holdLocal(set, p), nil
			})
		}
		if a[0] == 1 {
			l.mu.Lock()
			l.held[tok] = ls
			if l.cfg.Failure == FailLocal {
				l.perSet[set]++ // for adopt, FailLocal's alone
			}
			l.mu.Unlock()
			l.c.admit()
			return sluice.NewPermit(l, tok), nil
		}
		if !wait {
			return sluice.Permit{}, l.c.reject(sluice.Reject(sluice.ReasonLimit, 0))
		}
		t := time.NewTimer(poll/2 + rand.N(poll/2+1))
		select {
		case <-t.C:
		case <-deadline:
			t.Stop()
			return sluice.Permit{}, l.c.reject(sluice.Reject(sluice.ReasonQueueTimeout, 0))
		case <-ctx.Done():
			t.Stop()
			return sluice.Permit{}, ctx.Err()
		}
		poll = min(2*poll, l.cfg.PollMax)
	}
}

// holdLocal makes p, a permit FailLocal's limiter admitted for set, a
// lease pending in set: the renewer adds it to Redis once Redis answers,
// so that the other replicas count the work it admitted while Redis was
// away. The permit returned ends both.
func (l *leases) holdLocal(set string, p sluice.Permit) sluice.Permit {
	l.mu.Lock()
	l.seq++
	tok := l.seq
	l.held[tok] = lease{set: set, id: l.id + ":" + strconv.FormatUint(tok, 36), pending: true}
	l.local[tok] = p
	l.mu.Unlock()
	return sluice.NewPermit(l, tok)
}

// adopt makes lc, the FailLocal limiter deciding for set, count the leases
// this replica holds in set: a permit of lc per lease, as far as lc has
// room. Work admitted through Redis still runs when Redis goes away, and a
// local limiter that did not count it would admit its whole share on top.
// It runs before each local decision, so leases taken while Redis was back
// are counted at the next fallback; drop gives a permit back as its lease
// ends, which hands the slot to a local waiter.
func (l *leases) adopt(set string, lc *localConc) {
	var old []sluice.Permit
	l.mu.Lock()
	if n := l.perSet[set]; n > 0 {
		a := l.adopted[set]
		if a == nil {
			a = &adoption{lc: lc}
			l.adopted[set] = a
		}
		if a.lc != lc { // the key's limiter changed (evicted and made again)
			old, a.permits, a.lc = a.permits, nil, lc
		}
		for len(a.permits) < n {
			p, err := lc.TryAcquire()
			if err != nil {
				break // lc is full: it admits nothing more anyway
			}
			a.permits = append(a.permits, p)
		}
	}
	l.mu.Unlock()
	for i := range old {
		old[i].Cancel()
	}
}

// waitLocal runs the local limiter's decision under ctx and, for a waiter
// bounded by MaxWait (maxAt not zero), only for what is left of it: the
// time spent polling Redis counted, and the local limiter's own MaxWait
// would start it again. Past maxAt the waiter is rejected as the polling
// rejects it, ReasonQueueTimeout; a caller's deadline that comes first
// keeps its own reasons.
func waitLocal(ctx context.Context, maxAt time.Time, local func(context.Context) (sluice.Permit, error)) (sluice.Permit, error) {
	if maxAt.IsZero() {
		return local(ctx)
	}
	if dl, ok := ctx.Deadline(); ok && !dl.After(maxAt) {
		return local(ctx)
	}
	lctx, cancel := context.WithDeadline(ctx, maxAt)
	defer cancel()
	p, err := local(lctx)
	if err != nil && ctx.Err() == nil && (lctx.Err() != nil || sluice.ReasonOf(err) == sluice.ReasonDeadline) {
		return sluice.Permit{}, sluice.Reject(sluice.ReasonQueueTimeout, 0)
	}
	return p, err
}

// replicas is the N of FailLocal's limit/N.
func (l *leases) replicas() int {
	if l.cfg.Replicas > 0 {
		return l.cfg.Replicas
	}
	return l.s.Replicas()
}

// localLimit is FailLocal's limit in this process: ceil(Limit/n).
func (l *leases) localLimit(n int) int { return max(1, (l.cfg.Limit+n-1)/n) }

// orphan remembers a lease that may be in Redis though no permit holds it
// (an acquire whose answer was lost, a release that failed, a lease a
// renewal added back as it was released), so that the
// renewer removes it when Redis answers again; at worst it holds a slot
// for TTL. Only calls that may have reached Redis make orphans: with the
// breaker open, failed acquires cost nothing here.
func (l *leases) orphan(ls lease) {
	l.mu.Lock()
	l.addOrphan(ls)
	l.mu.Unlock()
}

// addOrphan is orphan with l.mu held.
func (l *leases) addOrphan(ls lease) {
	if len(l.orphans) < maxOrphans {
		l.orphans = append(l.orphans, ls)
	}
}

// Release removes the lease (sluice.Releaser), and releases FailLocal's
// permit with o and latency if it admitted the lease. If Redis does not
// answer, the lease expires after TTL.
func (l *leases) Release(tok uint64, o sluice.Outcome, latency time.Duration) {
	l.drop(tok, false, o, latency)
}

// Cancel is Release: a lease that never ran frees its slot the same way
// (and FailLocal's permit, if it admitted the lease, is cancelled).
func (l *leases) Cancel(tok uint64) { l.drop(tok, true, 0, 0) }

func (l *leases) drop(tok uint64, cancel bool, o sluice.Outcome, latency time.Duration) {
	var free sluice.Permit // a local permit that stood for this lease
	var own sluice.Permit  // FailLocal's permit that admitted this lease
	l.mu.Lock()
	ls, ok := l.held[tok]
	delete(l.held, tok)
	if p, isLocal := l.local[tok]; isLocal {
		own = p
		delete(l.local, tok)
	} else if ok && l.cfg.Failure == FailLocal {
		n := l.perSet[ls.set] - 1
		if n == 0 {
			delete(l.perSet, ls.set)
		} else {
			l.perSet[ls.set] = n
		}
		if a := l.adopted[ls.set]; a != nil {
			if k := len(a.permits); k > n {
				free = a.permits[k-1]
				a.permits[k-1] = sluice.Permit{}
				a.permits = a.permits[:k-1]
			}
			if n == 0 && len(a.permits) == 0 {
				delete(l.adopted, ls.set)
			}
		}
	}
	l.mu.Unlock()
	free.Cancel()
	if cancel {
		own.Cancel()
	} else {
		own.Release(o, latency)
	}
	if ok && !ls.pending {
		// Whether or not the call reached Redis, the lease may still be
		// there: orphan it on any failure (at most one per lease held).
		if _, err := l.s.eval(releaseScript, []string{ls.set}, ls.id); err != nil {
			l.orphan(ls)
		}
	}
}

// renewer renews every held lease each TTL/3, and removes orphaned ones.
func (l *leases) renewer() {
	defer close(l.done)
	tick := time.NewTicker(l.cfg.TTL / 3)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-l.quit:
			return
		}
		l.renewOnce()
	}
}

// renewOnce renews the held leases, renewChunk at most per script call
// (Redis runs one in well under a decision's Timeout); the sets with few
// leases renewParallel calls at a time, so that the store's pipeline
// carries many in one round trip (KeyedConcurrency has one set per key:
// 4000 keys renewed one round trip after another took 0.9 s). A lease
// Redis no longer has is added back (see renewScript): after a flush or a
// restart of Redis, the first renewal it answers makes it count every
// lease held here again. Then it removes up to orphanBatch orphans
// (those this renewal made among them), one ZREM per set. The newest
// orphans go first: the oldest are the likeliest to have expired by
// themselves.
func (l *leases) renewOnce() {
	var chunks []*renewal
	open := map[string]*renewal{}
	l.mu.Lock()
	for tok, ls := range l.held {
		c := open[ls.set]
		if c == nil || len(c.tokens) == renewChunk {
			c = &renewal{set: ls.set, args: []any{l.ttlMs}}
			open[ls.set] = c
			chunks = append(chunks, c)
		}
		c.tokens = append(c.tokens, tok)
		c.args = append(c.args, ls.id)
		c.pending = c.pending || ls.pending
	}
	l.mu.Unlock()
	renew := func(c *renewal) {
		v, err := l.s.eval(renewScript, []string{c.set}, c.args...)
		l.renewed(c, v, err)
	}
	// Small chunks (a set with few leases: KeyedConcurrency's keys) go
	// renewParallel at a time, and the pipeline carries them together;
	// large ones one at a time, each its own round trip, so that no round
	// trip holds more than about renewChunk leases.
	var small, large []*renewal
	for _, c := range chunks {
		if len(c.tokens)*renewParallel <= renewChunk {
			small = append(small, c)
		} else {
			large = append(large, c)
		}
	}
	next := make(chan *renewal)
	var wg sync.WaitGroup
	for range min(renewParallel, len(small)) {
		wg.Go(func() {
			for c := range next {
				renew(c)
			}
		})
	}
	for _, c := range small {
		next <- c
	}
	close(next)
	wg.Wait()
	for _, c := range large {
		renew(c)
	}
	l.mu.Lock()
	n := min(len(l.orphans), orphanBatch)
	rm := map[string][]any{}
	for _, ls := range l.orphans[len(l.orphans)-n:] {
		rm[ls.set] = append(rm[ls.set], ls.id)
	}
	l.orphans = l.orphans[:len(l.orphans)-n]
	l.mu.Unlock()
	for set, ids := range rm {
		if _, err := l.s.eval(releaseScript, []string{set}, ids...); err != nil {
			l.mu.Lock()
			for _, id := range ids {
				l.addOrphan(lease{set: set, id: id.(string)})
			}
			l.mu.Unlock()
		}
	}
}

// renewal is one renewal script call: a set, the tokens of the leases it
// renews, and its arguments (the TTL, then their ids in the same order);
// pending if some of them are.
type renewal struct {
	set     string
	tokens  []uint64
	args    []any
	pending bool
}

// renewed takes the answer to renewal c: the leases it found gone and
// added back are counted lost, once per time found. A lease released
// while the call was under way may be one of them (its release's ZREM ran
// first): no permit holds it now, so it is orphaned, and removed at the
// end of this renewal instead of holding a slot for TTL. So is every lease
// released meanwhile when the answer was lost after the call may have run.
// A failed call renews nothing: the leases expire after TTL, as with
// Redis unreachable, unless a later renewal adds them back. A pending
// lease the call added, or may have, is pending no more: its release
// removes it from Redis. (One whose answer was lost, then found gone by
// a later renewal, is counted lost though it may never have been there.)
func (l *leases) renewed(c *renewal, v any, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if sentMaybe(err) {
			for i, tok := range c.tokens {
				if _, ok := l.held[tok]; !ok {
					l.addOrphan(lease{set: c.set, id: c.args[i+1].(string)})
				}
			}
			l.sent(c)
		}
		return
	}
	l.renewals++
	lost, _ := v.([]any)
	for _, x := range lost {
		at, ok := x.(int64)
		if !ok || at < 1 || int(at) > len(c.tokens) {
			continue
		}
		ls, ok := l.held[c.tokens[at-1]]
		if !ok {
			l.addOrphan(lease{set: c.set, id: c.args[at].(string)})
			continue
		}
		if !ls.pending {
			l.lost++
		}
	}
	l.sent(c)
}

// sent marks the pending leases of c, a call that may have added them to
// Redis, as no longer pending. l.mu is held.
func (l *leases) sent(c *renewal) {
	if !c.pending {
		return
	}
	for _, tok := range c.tokens {
		if ls, ok := l.held[tok]; ok && ls.pending {
			ls.pending = false
			l.held[tok] = ls
		}
	}
}

// stats are the counters; InFlight is the leases Redis admitted that this
// replica holds (FailLocal's permits are its limiter's).
func (l *leases) stats() sluice.Stats {
	l.mu.Lock()
	n := len(l.held) - len(l.local)
	l.mu.Unlock()
	return l.c.stats(float64(l.cfg.Limit), n)
}

// LimiterStats returns the counters beyond sluice.Stats.
func (l *leases) LimiterStats() LimiterStats {
	s := l.c.limiterStats()
	l.mu.Lock()
	s.Lost, s.Renewals = l.lost, l.renewals
	l.mu.Unlock()
	return s
}
