package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/redis/go-redis/v9"
)

// heartbeatScript announces a replica and counts the live ones, on Redis's
// clock: each replica's member is scored by the time its announcement
// expires (3 heartbeats), expired members are removed, the rest counted.
// The set's TTL only grows, as the leases' sets do: a replica with a
// shorter heartbeat must not expire the announcements of longer ones.
var heartbeatScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return redis.call('ZCARD', KEYS[1])
`)

// heartbeat runs while the store is open when Config.Heartbeat is set. Its
// cost: one round trip per interval per replica, and a sorted set of one
// member per replica in Redis.
//
// Replicas is the largest of the last 3 counts, not the last: a count dips
// though no replica left when Redis has lost the set (a restart without
// persistence, a failover, a flush: each replica's first count after it is
// only those that announced since) or when a replica's announcement was
// late (a pause, or the slow Redis that sends decisions to FailLocal). A
// dip raises FailLocal's local share; a replica that really left is
// forgotten 2 heartbeats later, which errs on the strict side.
func (s *Store) heartbeat() {
	defer s.wg.Done()
	id := newID()
	ttl := 3 * s.cfg.Heartbeat
	tick := time.NewTicker(s.cfg.Heartbeat)
	defer tick.Stop()
	var last [3]int64
	for i := 0; ; {
		if v, err := s.eval(heartbeatScript, []string{s.cfg.HeartbeatKey}, id, ttl.Milliseconds()); err == nil {
			if n, ok := v.(int64); ok && n > 0 {
				last[i%len(last)] = n
				i++
				s.replicas.Store(max(last[0], last[1], last[2]))
			}
		}
		select {
		case <-tick.C:
		case <-s.quit:
			s.withdraw(id)
			return
		}
	}
}

// withdraw removes the replica's announcement as the store closes: the
// others' next count leaves it out, so that they stop counting it 2
// heartbeats later (Replicas is the largest of the last 3 counts) rather
// than about 5, once it expired (their FailLocal share stays smaller
// meanwhile). Best effort, within the store's timeout: an announcement
// left behind expires on its own.
func (s *Store) withdraw(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	_ = s.client.ZRem(ctx, s.cfg.HeartbeatKey, id).Err()
}

// newID is a random identifier for a replica or a lease.
func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
