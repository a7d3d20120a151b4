// Package promsluice exports sluice's limiters to Prometheus.
//
// A Collector reads a limiter's Stats when Prometheus scrapes, and turns it
// into constant metrics: nothing is counted twice and nothing runs between
// scrapes. Nothing is registered for you (no init, no global registry):
//
//	lim, _ := concurrency.New(concurrency.Config{Limit: 100, MaxQueue: 50})
//	timed, c, err := promsluice.Instrument("api", lim)
//	reg.MustRegister(c)
//	// serve with timed instead of lim: its Acquire feeds the wait histogram
//
// Every metric has a constant label limiter="<name>", so several collectors
// share one registry as long as their names differ (registering a second
// collector with the same name fails, as it should).
//
// # Metrics
//
//	name                              type       labels   source
//	sluice_admitted_total             counter    limiter  Stats.Admitted
//	sluice_rejected_total             counter    limiter, reason
//	                                                      Stats.Rejected, one series per sluice.Reason
//	sluice_in_flight                  gauge      limiter  Stats.InFlight
//	sluice_queued                     gauge      limiter  Stats.Queued
//	sluice_limit                      gauge      limiter  Stats.Limit (permits, or events per second)
//	sluice_acquire_wait_seconds       histogram  limiter  Instrument only: Acquire's wait, admitted calls
//	sluice_keys                       gauge      limiter  keyed: live keys
//	sluice_keys_max                   gauge      limiter  keyed: the MaxKeys cap
//	sluice_keys_created_total         counter    limiter  keyed: keys stored
//	sluice_keys_evicted_total         counter    limiter  keyed: idle keys evicted to make room
//	sluice_keys_overflowed_total      counter    limiter  keyed: new keys served by the overflow limiter
//	sluice_client_requests_total      counter    limiter  client: requests started (not retries)
//	sluice_client_retries_total       counter    limiter  client: attempts after the first
//	sluice_client_retries_denied_total counter   limiter  client: retries the retry budget refused
//	sluice_client_throttled_total     counter    limiter  client.Transport: attempts its Limiter rejected locally
//	sluice_store_fallbacks_total      counter    limiter  shared: decisions by the failure policy, Redis away
//	sluice_store_cache_hits_total     counter    limiter  shared: rejections from the over-limit cache
//	sluice_store_local_admits_total   counter    limiter  shared: admissions from batched tokens
//	sluice_store_leases_lost_total    counter    limiter  shared: leases a renewal found gone from Redis and added back
//	sluice_store_round_trip_seconds   histogram  store    store calls as limiters waited for them
//	sluice_store_calls_total          counter    store    calls sent to Redis
//	sluice_store_round_trips_total    counter    store    round trips (calls sent alone, pipelines)
//	sluice_store_errors_total         counter    store    failed calls, timeouts included
//	sluice_store_timeouts_total       counter    store    calls failed by the per-call timeout
//	sluice_store_breaker_rejects_total counter   store    calls refused by the open breaker
//	sluice_store_breaker_trips_total  counter    store    times the breaker opened
//	sluice_store_breaker_state        gauge      store    0 closed, 1 open, 2 half-open
//	sluice_store_replicas             gauge      store    live replicas by the heartbeat
//	sluice_store_cross_slot_total     counter    store    merged script calls refused with CROSSSLOT
//
// Reasons are sluice.Reason's names (rate, limit, queue_full, queue_timeout,
// deadline, shed, throttled, too_large, store); every one is exported from
// the first scrape, at 0, so rate() works from the start. A rejection of no
// known reason is counted as unknown, a series that appears only then.
//
// The wait histogram's buckets are by default prometheus.DefBuckets (5 ms to
// 10 s), the buckets of GitLab's acquiring-seconds histogram in seed 001;
// change them with the Buckets option.
//
// # Which constructor
//
//   - NewCollector: anything with Stats() sluice.Stats — every limiter
//     (concurrency, rate, adaptive, a client.Throttler, sluice.All) and a
//     netlimit.Listener.
//   - Instrument: the same, plus the wait histogram, by wrapping the limiter.
//   - NewKeyedCollector: a keyed.Map or keyed.Buckets, with its key table.
//   - NewTransportCollector, NewRetrierCollector: the client package's
//     request, retry and local-throttling counters.
//   - NewStoreCollector: a redisstore.Store (label store, not limiter),
//     and NewSharedCollector: a limiter shared through it, with its
//     failure-policy and cache counters.
package promsluice
