package proxy

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/redisstore"
)

// Keys in Redis. Proxies share a limit when they give it the same policy
// name in the same store: the key is the policy's name, so two proxies
// with a policy "api" in one Redis count against one quota.
const (
	ratePrefix = "sluice:proxy:" // + NAME + ":{KEY}" (redisstore adds the hash tag)
	globalKey  = "*"             // the one key of a global shared bucket
	concPrefix = "proxy:"        // + NAME, inside redisstore's "sluice:conc:{...}"
)

// buildShared makes the limiters of a policy kept in a store: a token
// bucket (global, one key, or per key) and a concurrency limit of leases,
// both following the store's failure policy when Redis does not answer.
// validateShared has refused what a store does not share.
func (c *Config) buildShared(pol *policy, at string) (*policy, error) {
	p, st := pol.spec, pol.store
	var globals []sluice.Limiter
	var buckets keyedLimiter
	if r := p.Rate; r != nil {
		var err error
		pol.sharedRate, err = redisstore.NewBuckets(st.s, redisstore.RateConfig{
			Prefix:   ratePrefix + p.Name + ":",
			Rate:     r.Rate,
			Burst:    r.Burst,
			MaxWait:  r.MaxWait,
			Failure:  st.failure,
			Replicas: st.spec.Replicas,
			MaxKeys:  p.MaxKeys,
		})
		if err != nil {
			return nil, c.wrapAt(at+".rate", err)
		}
		if r.PerKey {
			buckets = pol.sharedRate
		} else {
			var l sluice.Limiter = pol.sharedRate.Key(globalKey)
			if r.MaxWait == 0 {
				l = noWait{l}
			}
			globals = append(globals, l)
		}
		// The remaining tokens would cost a round trip per answer: the
		// RateLimit header is sent with 429 answers only.
		pol.quota = &httplimit.RatePolicy{
			Name:   p.Name,
			Quota:  r.Burst,
			Window: r.window(),
		}
	}
	if cs := p.Concurrency; cs != nil {
		var err error
		pol.sharedConc, err = redisstore.NewConcurrency(st.s, redisstore.ConcurrencyConfig{
			Key:      concPrefix + p.Name,
			Limit:    cs.Limit,
			MaxWait:  cs.MaxWait,
			Failure:  st.failure,
			Replicas: st.spec.Replicas,
		})
		if err != nil {
			return nil, c.wrapAt(at+".concurrency", err)
		}
		globals = append(globals, pol.sharedConc)
	}
	return c.finish(pol, at, globals, buckets)
}

// close stops what a policy runs in the background: a shared concurrency
// limit's lease renewal. Leases still held by requests in flight expire
// after their TTL. It does not close the store, which other policies may
// use.
func (p *policy) close() {
	if p.sharedConc != nil {
		p.sharedConc.Close()
	}
}
