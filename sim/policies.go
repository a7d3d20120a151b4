package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/concurrency"
)

// Policy is one admission policy to run the scenario with: a NonePolicy,
// ConcurrencyPolicy, AdaptivePolicy, TokenBucketPolicy or TickerPolicy.
// Each type holds only its own settings, and its zero value (with the
// required fields set) takes the defaults its fields document.
type Policy interface {
	// Kind is the policy's kind, as a scenario file's kind key names it.
	Kind() PolicyKind
	// Label names the policy's results: its Name, or its kind when Name is
	// empty.
	Label() string

	// validate checks the policy's fields; f is the policy's path
	// ("policies[1]").
	validate(f string) error
	// waiting bounds the requests that can wait in the policy at once
	// (see checkWaiting): the field that bounds them, and the bound; ""
	// when none wait.
	waiting(s *Scenario, peak, requests float64) (field string, most float64)
	// start builds the policy for one run.
	start(e *engine) (gate, error)
}

// PolicyKind names what sits between the clients and the origin.
type PolicyKind string

// The policies' kinds.
const (
	None        PolicyKind = "none"         // NonePolicy
	Concurrency PolicyKind = "concurrency"  // ConcurrencyPolicy
	Adaptive    PolicyKind = "adaptive"     // AdaptivePolicy
	TokenBucket PolicyKind = "token-bucket" // TokenBucketPolicy
	Ticker      PolicyKind = "ticker"       // TickerPolicy
)

// policyKinds lists the kinds in the order errors and docs give them.
var policyKinds = []PolicyKind{None, Concurrency, Adaptive, TokenBucket, Ticker}

// PolicyKinds lists every kind NewPolicy knows.
func PolicyKinds() []PolicyKind { return slices.Clone(policyKinds) }

// NewPolicy returns the zero Policy of kind, for a decoder to fill in: a
// scenario file names the kind first and the type's fields after it.
func NewPolicy(kind PolicyKind) (Policy, error) {
	switch kind {
	case None:
		return NonePolicy{}, nil
	case Concurrency:
		return ConcurrencyPolicy{}, nil
	case Adaptive:
		return AdaptivePolicy{}, nil
	case TokenBucket:
		return TokenBucketPolicy{}, nil
	case Ticker:
		return TickerPolicy{}, nil
	}
	return nil, fmt.Errorf("unknown policy %q (%s)", kind, kindNames())
}

func kindNames() string {
	names := make([]string, len(policyKinds))
	for i, k := range policyKinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// label is Label for a policy named name of kind k.
func label(name string, k PolicyKind) string {
	if name == "" {
		return string(k)
	}
	return name
}

// NonePolicy admits everything: the baseline.
type NonePolicy struct {
	// Name labels the policy's results. Default: its kind.
	Name string `yaml:"name" json:"name"`
}

// ConcurrencyPolicy is a static in-flight limit (package concurrency) with
// an optional queue (QueueConfig).
type ConcurrencyPolicy struct {
	// Name labels the policy's results. Default: its kind.
	Name string `yaml:"name" json:"name"`
	// Limit is the most requests in flight. Required (> 0).
	Limit int `yaml:"limit" json:"limit"`

	QueueConfig `yaml:",inline"`
}

// QueueConfig is the queue in front of a ConcurrencyPolicy's or an
// AdaptivePolicy's limit. Both embed it, so a queue option added here is
// one both take, under the same key, checked the same way. Its zero value
// is no queue: a request over the limit is rejected at once.
type QueueConfig struct {
	// Queue is the most requests waiting for admission: 0 rejects at once,
	// Unbounded (-1) never rejects for length. Default 0.
	Queue int `yaml:"queue" json:"queue"`
	// MaxWait is the longest a request waits for admission; 0: no limit
	// other than its own deadline.
	MaxWait time.Duration `yaml:"max_wait" json:"max_wait"`
	// MaxWaitServices bounds the wait to that many mean service times, as
	// the limiter measures them, once the queue stands
	// (concurrency.Config.MaxWaitServices); 0: none.
	MaxWaitServices float64 `yaml:"max_wait_services" json:"max_wait_services"`
	// Discipline orders the queue: fifo (default), lifo, codel or
	// adaptive_lifo (concurrency.Discipline's names).
	Discipline concurrency.Discipline `yaml:"discipline" json:"discipline"`
	// CoDelTarget and CoDelInterval tune the codel and adaptive_lifo
	// disciplines. Defaults: the concurrency package's (5 ms and 100 ms).
	CoDelTarget   time.Duration `yaml:"codel_target" json:"codel_target"`
	CoDelInterval time.Duration `yaml:"codel_interval" json:"codel_interval"`
}

// AdaptivePolicy is an in-flight limit set by an algorithm (package
// adaptive) from the latency and outcome of each response, with the same
// queue (QueueConfig) as a ConcurrencyPolicy.
type AdaptivePolicy struct {
	// Name labels the policy's results. Default: its kind.
	Name string `yaml:"name" json:"name"`
	// Algorithm is the adaptive algorithm (algorithms lists them). Default
	// little (the recommended one, package adaptive's Little).
	Algorithm AlgorithmKind `yaml:"algorithm" json:"algorithm"`
	// Limit is the initial limit; MinLimit and MaxLimit bound it. When set
	// they override the algorithm config's InitialLimit, MinLimit and
	// MaxLimit. Defaults: the algorithm's own.
	Limit    int `yaml:"limit" json:"limit"`
	MinLimit int `yaml:"min_limit" json:"min_limit"`
	MaxLimit int `yaml:"max_limit" json:"max_limit"`
	// AIMD, Vegas, Gradient2 and Little tune the adaptive algorithm of that name
	// (only the one selected by Algorithm may be set); their zero values
	// are the algorithm's defaults. In YAML their keys are the lowercased
	// field names (aimd: {backoff: 0.9, timeout: 2s}).
	AIMD      adaptive.AIMDConfig      `yaml:"aimd" json:"aimd"`
	Vegas     adaptive.VegasConfig     `yaml:"vegas" json:"vegas"`
	Gradient2 adaptive.Gradient2Config `yaml:"gradient2" json:"gradient2"`
	Little    adaptive.LittleConfig    `yaml:"little" json:"little"`

	QueueConfig `yaml:",inline"`
}

// TokenBucketPolicy is a rate limit (package rate). With MaxWait > 0 a
// request may wait for a token up to MaxWait and its deadline, and is
// rejected at once when its reservation could not be met in time.
type TokenBucketPolicy struct {
	// Name labels the policy's results. Default: its kind.
	Name string `yaml:"name" json:"name"`
	// Rate is the rate in requests per second. Required (> 0).
	Rate float64 `yaml:"rate" json:"rate"`
	// Burst is the bucket's size. Default 1.
	Burst int `yaml:"burst" json:"burst"`
	// MaxWait is the longest a request waits for a token. Default 0: it
	// does not wait.
	MaxWait time.Duration `yaml:"max_wait" json:"max_wait"`
}

// TickerPolicy is seed 000's time.Ticker feeding a channel of Burst tokens
// at Rate per second; requests wait in FIFO order for a token, up to
// MaxWait, in a queue of at most Queue. It is not sluice code: it is the
// baseline the seed measured.
type TickerPolicy struct {
	// Name labels the policy's results. Default: its kind.
	Name string `yaml:"name" json:"name"`
	// Rate is the ticks per second. Required (> 0).
	Rate float64 `yaml:"rate" json:"rate"`
	// Burst is the channel's buffer, full at the start. Default 1.
	Burst int `yaml:"burst" json:"burst"`
	// Queue is the most requests waiting for a token: 0 rejects at once,
	// Unbounded (-1) never rejects for length. Default 0.
	Queue int `yaml:"queue" json:"queue"`
	// MaxWait is the longest a request waits for a token; 0: forever.
	MaxWait time.Duration `yaml:"max_wait" json:"max_wait"`
}

func (NonePolicy) Kind() PolicyKind        { return None }
func (ConcurrencyPolicy) Kind() PolicyKind { return Concurrency }
func (AdaptivePolicy) Kind() PolicyKind    { return Adaptive }
func (TokenBucketPolicy) Kind() PolicyKind { return TokenBucket }
func (TickerPolicy) Kind() PolicyKind      { return Ticker }

func (p NonePolicy) Label() string        { return label(p.Name, None) }
func (p ConcurrencyPolicy) Label() string { return label(p.Name, Concurrency) }
func (p AdaptivePolicy) Label() string    { return label(p.Name, Adaptive) }
func (p TokenBucketPolicy) Label() string { return label(p.Name, TokenBucket) }
func (p TickerPolicy) Label() string      { return label(p.Name, Ticker) }
