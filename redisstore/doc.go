// Package redisstore shares limits across replicas through Redis
// (github.com/redis/go-redis/v9: one node, Sentinel or Cluster), so that
// three replicas at "100/s" let 100/s through, not 300.
//
// A Store is the connection: it runs the limiters' Lua scripts within a
// per-call timeout (Config.Timeout, 5 ms by default, a hard bound on the
// decision), sends a lone call at once on its caller's goroutine and
// concurrent calls in one pipeline (one round trip, and on a single node
// one script call, for up to MaxBatch decisions; a server that refuses
// that call with CROSSSLOT, a Cluster node or proxy behind one address,
// gets one script call per decision from then on), and keeps a circuit
// breaker, counting failed round trips, so that a dead Redis costs a
// decision a microsecond, not a timeout. Open builds one from a URL (redis://,
// redis+cluster://), which is what a config file's `store:` names.
//
// Two limiters share their state through it:
//
//   - Buckets: a token bucket per key, GCRA in one script on Redis's clock
//     (TIME), so the replicas' clocks do not matter. Weighted requests
//     (n over Burst is refused before any round trip: no wait admits it);
//     a rejection carries a Retry-After rounded up, so a client that waits
//     exactly that long is admitted; a key's TTL is its time to refill.
//     Buckets.Key(k) is a sluice.Limiter; Buckets itself is a per-key
//     limiter for httplimit's Config.PerKey. Keys sit in hash tags
//     ("prefix{key}") so they work on Cluster.
//   - Concurrency: a limit on work in flight across replicas, as leases in
//     a sorted set scored by expiry, renewed while the work runs and
//     removed on release; a crashed replica's leases expire after TTL.
//     A renewal adds back the leases Redis no longer has (a FLUSHALL, a
//     restart without persistence, a failover to a replica that had not
//     got them, or a lease that expired while its holder was paused):
//     until then Redis undercounts and admits up to that many beyond
//     Limit. Each replica's first renewal that Redis answers adds its
//     leases back, at most TTL/3 after Redis answers again and the
//     store's breaker has closed; from then the count is right, and no
//     one is admitted until it is under Limit.
//     KeyedConcurrency is the same limit per key (a set per key, each in
//     its own Cluster slot), a per-key limiter for httplimit.
//
// When Redis does not answer in time, each limiter follows its Failure
// policy: FailOpen (admit), FailClosed (reject with sluice.ReasonStore, a
// 503), or FailLocal (a limiter in the process at limit/N, N the live
// replicas counted by a heartbeat, from which a closing Store withdraws,
// or configured). Shared limits come back
// by themselves when Redis does: the breaker lets a probe through after
// BreakerCooldown. A concurrency limit's permits that FailLocal admitted
// are added to Redis as leases by the first renewal Redis answers, as
// lost leases are: until then, at most TTL/3 after Redis answers and the
// breaker has closed, every replica admits through Redis as if they were
// not running. FailOpen's admissions hold nothing: Redis never counts
// them.
//
// Beyond one round trip per decision, Buckets keeps a local cache of keys
// known to be over their limit until their retry-after (a rejected flood
// does not reach Redis), and an optional batched mode (RateConfig.Batch)
// that takes several tokens per round trip for hot keys, with the
// overshoot bound in its doc.
//
// Keys in Redis: Buckets writes one Redis key per distinct key it admits
// ("Prefix{key}", one string), which expires when its bucket is full again,
// Burst/Rate (plus any wait it granted) after the key's last admitted
// request at the latest; a rejection writes nothing. So Redis holds one key
// per distinct key admitted within the last Burst/Rate, bounded by that TTL
// and not by RateConfig.MaxKeys, which caps only the maps in this process.
// Keyed by client input (an address, a header), a flood of distinct keys
// costs a Redis key each for up to Burst/Rate: size Redis's maxmemory for
// the distinct keys expected within that time. Concurrency keeps one sorted
// set per limit, a member per lease held; KeyedConcurrency one per key
// with leases, which expires TTL after its last lease.
//
// Metrics: Store.Stats (round-trip histogram, errors, timeouts, breaker
// state and trips, round trips, CROSSSLOT refusals) and each limiter's Stats and LimiterStats
// (fallbacks, cache hits). The package has no Prometheus dependency:
// promsluice.NewStoreCollector and NewSharedCollector expose them.
//
// Tests and benchmarks start real redis-server processes on free loopback
// ports with package redistest.
package redisstore
