package sim

import "time"

// Scenario is one experiment: a modeled origin, an open-loop load and the
// policies to compare in front of it. Each policy runs against its own copy
// of the origin and the same arrival sequence (the same Seed), so their
// figures compare like with like.
type Scenario struct {
	// Name labels the results.
	Name string `yaml:"name" json:"name"`
	// Seed makes the run deterministic: the same scenario and seed give the
	// same results, bit for bit.
	Seed uint64 `yaml:"seed" json:"seed"`
	// Duration is the simulated time to run. Required.
	Duration time.Duration `yaml:"duration" json:"duration"`
	// Interval is the width of one point of the time series. Default 1s.
	Interval time.Duration `yaml:"interval" json:"interval"`
	// Warmup is left out of the summary: what happens before it (sends,
	// responses, rejections) is not counted; the series still shows it.
	// Default 0.
	Warmup time.Duration `yaml:"warmup" json:"warmup"`
	// Origin is the modeled service.
	Origin Origin `yaml:"origin" json:"origin"`
	// Load is the client population.
	Load Load `yaml:"load" json:"load"`
	// Policies are what is put between the clients and the origin, run one
	// after the other: NonePolicy, ConcurrencyPolicy, AdaptivePolicy,
	// TokenBucketPolicy, TickerPolicy. At least one is required.
	Policies []Policy `yaml:"policies" json:"policies"`
}

// Unbounded as a queue length means no bound at all.
const Unbounded = -1

// Origin models a service: Workers serve requests one at a time, each for a
// time drawn from Service; a request that finds every worker busy waits in a
// FIFO queue of at most Queue requests, or is refused when it is full.
//
// The origin does not know when a client gives up: work for a client that
// timed out is still done (wasted), as in seed 003.
type Origin struct {
	// Workers is the number of requests served at once. Required (> 0).
	Workers int `yaml:"workers" json:"workers"`
	// Queue is the most requests waiting for a worker: 0 refuses a request
	// when every worker is busy, Unbounded (-1) never refuses. Default 0.
	Queue int `yaml:"queue" json:"queue"`
	// Timeout, when > 0, is how long the origin holds a request before it
	// answers with an error (seed 000's upstream: 500 ms). A request still
	// queued then leaves the queue; one in service keeps its worker until
	// done. Default 0: no origin timeout.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
	// Service is the distribution of service times. Required.
	Service Dist `yaml:"service" json:"service"`
	// Changes alter the origin at given times (a slowdown, workers lost).
	Changes []Change `yaml:"changes" json:"changes"`
}

// Change alters the origin from time At on. Zero fields leave the origin as
// it was.
type Change struct {
	// At is when the change takes effect, from the start of the run.
	At time.Duration `yaml:"at" json:"at"`
	// Workers, when > 0, is the new number of workers. Requests in service
	// on lost workers finish; no new ones start until the busy count is
	// below the new number.
	Workers int `yaml:"workers" json:"workers"`
	// Service, when its Kind is set, is the new service-time distribution,
	// used for requests that start service from At on.
	Service Dist `yaml:"service" json:"service"`
}

// DistKind names a service-time distribution.
type DistKind string

// The service-time distributions.
const (
	Constant    DistKind = "constant"    // always Mean
	Exponential DistKind = "exponential" // exponential with mean Mean
	Lognormal   DistKind = "lognormal"   // lognormal with mean Mean and shape Sigma
	Bimodal     DistKind = "bimodal"     // Mean, or Tail with probability TailFraction
)

// Dist is a service-time distribution.
type Dist struct {
	// Kind is the distribution. Required.
	Kind DistKind `yaml:"kind" json:"kind"`
	// Mean is the constant value, the mean (exponential, lognormal), or the
	// common mode (bimodal). Required (> 0).
	Mean time.Duration `yaml:"mean" json:"mean"`
	// Sigma is the lognormal shape: the standard deviation of the
	// underlying normal. Default 1.
	Sigma float64 `yaml:"sigma" json:"sigma"`
	// Tail is the bimodal slow mode's value. Required for bimodal.
	Tail time.Duration `yaml:"tail" json:"tail"`
	// TailFraction is the probability of the slow mode, in [0, 1].
	TailFraction float64 `yaml:"tail_fraction" json:"tail_fraction"`
}

// ArrivalKind names an arrival process.
type ArrivalKind string

// The arrival processes. Both are open loop: requests are sent on schedule
// whatever happened to the earlier ones.
const (
	ConstantArrivals ArrivalKind = "constant" // evenly spaced
	PoissonArrivals  ArrivalKind = "poisson"  // exponential gaps
)

// Load is an open-loop client population. Latency is measured from the
// intended send time, so a stalled client does not hide a stall.
type Load struct {
	// Arrivals is the arrival process. Default constant.
	Arrivals ArrivalKind `yaml:"arrivals" json:"arrivals"`
	// Rate is the request rate from time 0, in requests per second.
	Rate float64 `yaml:"rate" json:"rate"`
	// Steps change the rate at given times (a step schedule), or, with
	// Ramp, are the corners of a piecewise-linear one.
	Steps []Step `yaml:"steps" json:"steps"`
	// Ramp interpolates the rate linearly between Rate at 0 and the steps,
	// instead of jumping at each step.
	Ramp bool `yaml:"ramp" json:"ramp"`
	// Bursts adds groups of requests sent at the same instant; they reach
	// the policy in order, a nanosecond apart, as over sockets.
	Bursts Bursts `yaml:"bursts" json:"bursts"`
	// Timeout is the client's deadline from the intended send time: a
	// response later than that is worthless and the client stops waiting.
	// A retry keeps its request's deadline.
	// 0: no deadline (every response counts as goodput).
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
	// ClientWorkers, when > 0, is how many requests the clients can have
	// outstanding; a request due while all are busy is not sent (counted as
	// unsent), like a generator whose ticks are dropped. Default 0: no cap.
	ClientWorkers int `yaml:"client_workers" json:"client_workers"`
	// Retries makes clients try again after a failure.
	Retries Retries `yaml:"retries" json:"retries"`
}

// Step sets the request rate from time At on.
type Step struct {
	At   time.Duration `yaml:"at" json:"at"`
	Rate float64       `yaml:"rate" json:"rate"`
}

// Bursts sends Size requests at once, Count times, every Every, starting at
// At. Size 0 means no bursts.
type Bursts struct {
	Size  int           `yaml:"size" json:"size"`
	Every time.Duration `yaml:"every" json:"every"`
	Count int           `yaml:"count" json:"count"`
	At    time.Duration `yaml:"at" json:"at"`
}

// Retries is the clients' retry policy. A failed attempt (rejected, refused,
// timed out at the origin) is retried after a jittered exponential backoff,
// while the budget allows and the backoff ends before the request's
// deadline (Load.Timeout from its first send: a client timeout ends the
// request). Each first attempt earns Budget retry tokens (at most 10 saved),
// each retry spends one. A retry is the same request: its latency is from
// the first attempt's intended send.
type Retries struct {
	// Max is the most retries per request. Default 0: no retries.
	Max int `yaml:"max" json:"max"`
	// Budget is the retry tokens earned per first attempt: 0.1 allows
	// retries to add at most 10% to the load. Default 0 with Max > 0 means
	// no budget (every failure may be retried Max times).
	Budget float64 `yaml:"budget" json:"budget"`
	// Backoff is the base backoff: the n-th retry waits a uniformly random
	// time in [0, Backoff·2^(n-1)]. Default 0: retry at once.
	Backoff time.Duration `yaml:"backoff" json:"backoff"`
}

// AlgorithmKind names an adaptive limit algorithm.
type AlgorithmKind string

// The adaptive limit algorithms.
const (
	AIMD      AlgorithmKind = "aimd"
	Vegas     AlgorithmKind = "vegas"
	Gradient2 AlgorithmKind = "gradient2"
	Little    AlgorithmKind = "little"
)
