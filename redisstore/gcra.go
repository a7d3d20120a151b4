package redisstore

import (
	"fmt"
	"math"

	"github.com/redis/go-redis/v9"
)

// gcraScript is the shared token bucket, GCRA (overload_science.md §14.1)
// over one string key per bucket holding the TAT, the theoretical arrival
// time: the time at which the bucket will be full again, in µs since Unix
// time 1,700,000,000 (the epoch, 2023-11-14) on Redis's clock (TIME), so
// the replicas' clocks never matter.
// A bucket of Burst tokens refilling one token every T µs is full when
// TAT <= now; it admits n tokens when TAT + n·T − Burst·T <= now (+ the
// allowed wait).
//
// It decides one key: KEYS[1] is the bucket, and ARGV[1..5] its T (µs per
// token, a float), burst, n (tokens wanted), k (tokens taken if available,
// k >= n: the batched mode takes k and spends them locally), maxwait (µs
// the caller may wait for its tokens; 0 for a decision now).
// gcraBatchScript decides several at once, with the same arithmetic.
//
// Reply: {allowed, remaining, retry_or_wait_us, reset_us, granted,
// retry1_us}. Allowed: wait_us is how long the caller must wait before
// acting (0 now). Rejected: retry_us is rounded up, so that a caller that
// waits exactly that long is admitted (brandur/redis-cell#56), and
// retry1_us is when one token will be there (the over-limit cache keeps
// it). The key's TTL is the time until the bucket is full: an idle key
// vanishes. A key holding another type is Redis's error.
//
// Times stay below 2^53 µs (285 years after the epoch) so a double holds
// them exactly; the epoch only keeps the fractional part of the TAT fine.
// The TAT goes to SET as a Lua number, which Redis writes exactly (the
// shortest string that reads back as the same double, or %.17g before
// 7.0), without a string.format per decision.
//
// Every decision that is not merged with others runs this script (a lone
// caller's, each one on a Cluster), and a lone caller waits for Redis to
// run it: it is kept lean (docs/benchmarks.md, Redis's time per call):
// no loop, no redis.pcall and its error checks, no table of replies, and
// the strings of TIME and ARGV used in arithmetic as they are (Lua
// converts them) rather than through tonumber.
var gcraScript = redis.NewScript(`
local t = redis.call('TIME')
local now = (t[1] - 1700000000) * 1000000 + t[2]
local T, n = tonumber(ARGV[1]), tonumber(ARGV[3])
local tau = T * ARGV[2]
local tat = tonumber(redis.call('GET', KEYS[1]) or '') or now
if tat < now then tat = now end
local avail = math.floor((now + tau - tat) / T + 1e-6)
local g, k = n, tonumber(ARGV[4])
if k > n and avail > n then g = math.min(k, avail) end
local new = tat + T * g
local wait = new - tau - now
if wait > ARGV[5] + 0.001 then
  local retry1 = math.ceil(tat + T - tau - now - 0.001)
  if retry1 < 0 then retry1 = 0 end
  if avail < 0 then avail = 0 end
  return {0, avail, math.ceil(tat + T * n - tau - now - 0.001), math.ceil(tat - now), 0, retry1}
end
local reset = math.ceil(new - now)
redis.call('SET', KEYS[1], new, 'PX', math.ceil(reset / 1000))
local w = 0
if wait > 0 then w = math.ceil(wait - 0.001) end
local rem = avail - g
if rem < 0 then rem = 0 end
return {1, rem, w, reset, g, 0}
`)

// gcraBatchScript is gcraScript for any number of buckets, so that
// concurrent decisions share one script call (Redis spends about as much
// on calling a script as on one decision), with no Lua function or Lua
// pcall per key (redis.pcall isolates a key's error): KEYS[i] is a
// bucket, and ARGV[5i-4..5i] its arguments, as gcraScript's. A key may come twice:
// the decisions run in order. Reply: an array with, per key, gcraScript's
// reply or the error of that key alone (a key holding another type, a
// full Redis).
var gcraBatchScript = redis.NewScript(`
local t = redis.call('TIME')
local now = (t[1] - 1700000000) * 1000000 + t[2]
local out = {}
for i = 1, #KEYS do
  local j = 5 * (i - 1)
  local T, n = tonumber(ARGV[j + 1]), tonumber(ARGV[j + 3])
  local tau = T * ARGV[j + 2]
  local cur = redis.pcall('GET', KEYS[i])
  if type(cur) == 'table' and cur.err then
    out[i] = cur
  else
    local tat = tonumber(cur or '') or now
    if tat < now then tat = now end
    local avail = math.floor((now + tau - tat) / T + 1e-6)
    local g, k = n, tonumber(ARGV[j + 4])
    if k > n and avail > n then g = math.min(k, avail) end
    local new = tat + T * g
    local wait = new - tau - now
    if wait > ARGV[j + 5] + 0.001 then
      local retry1 = math.ceil(tat + T - tau - now - 0.001)
      if retry1 < 0 then retry1 = 0 end
      if avail < 0 then avail = 0 end
      out[i] = {0, avail, math.ceil(tat + T * n - tau - now - 0.001), math.ceil(tat - now), 0, retry1}
    else
      local reset = math.ceil(new - now)
      local set = redis.pcall('SET', KEYS[i], new, 'PX', math.ceil(reset / 1000))
      if type(set) == 'table' and set.err then
        out[i] = set
      else
        local w = 0
        if wait > 0 then w = math.ceil(wait - 0.001) end
        local rem = avail - g
        if rem < 0 then rem = 0 end
        out[i] = {1, rem, w, reset, g, 0}
      end
    end
  end
end
return out
`)

// gcraArgs is the number of ARGV per key of gcraScript and gcraBatchScript.
const gcraArgs = 5

// refundScript gives back n tokens (Permit.Cancel): the TAT moves back by
// n·T, never before now (a bucket holds at most Burst tokens).
var refundScript = redis.NewScript(`
local tat = tonumber(redis.call('GET', KEYS[1]) or '')
if not tat then return 0 end
local t = redis.call('TIME')
local now = (tonumber(t[1]) - 1700000000) * 1000000 + tonumber(t[2])
local new = tat - tonumber(ARGV[1]) * tonumber(ARGV[2])
if new <= now then
  redis.call('DEL', KEYS[1])
  return 1
end
redis.call('SET', KEYS[1], new, 'PX', math.ceil((new - now) / 1000))
return 1
`)

// gcraReply is the parsed reply of gcraScript.
type gcraReply struct {
	allowed   bool
	remaining int64
	waitUs    int64 // allowed: wait before acting; rejected: retry-after
	resetUs   int64
	granted   int64
	retry1Us  int64
}

// parseGCRA reads gcraScript's reply. Any other shape is an error
// wrapping ErrReply, never a panic: a proxy or a different script under
// the same SHA could answer anything.
func parseGCRA(v any) (gcraReply, error) {
	var a [6]int64
	if err := parseInts(v, a[:]); err != nil {
		return gcraReply{}, err
	}
	r := gcraReply{allowed: a[0] == 1, remaining: a[1], waitUs: a[2], resetUs: a[3], granted: a[4], retry1Us: a[5]}
	if (a[0] != 0 && a[0] != 1) || r.remaining < 0 || r.waitUs < 0 || r.granted < 0 || r.retry1Us < 0 || r.waitUs > maxMicros || r.resetUs > maxMicros || r.retry1Us > maxMicros {
		return gcraReply{}, fmt.Errorf("%w: %v", ErrReply, v)
	}
	return r, nil
}

// maxMicros bounds the durations a reply may carry (about 292 years,
// the range of time.Duration).
const maxMicros = math.MaxInt64 / 1000

// parseInts fills out from a reply that must be an array of exactly
// len(out) integers.
func parseInts(v any, out []int64) error {
	arr, ok := v.([]any)
	if !ok || len(arr) != len(out) {
		return fmt.Errorf("%w: %T %v", ErrReply, v, v)
	}
	for i, x := range arr {
		n, ok := x.(int64)
		if !ok {
			return fmt.Errorf("%w: element %d is %T", ErrReply, i, x)
		}
		out[i] = n
	}
	return nil
}
