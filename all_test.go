package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/rate"
)

// A rate limit (no refill, so tokens only move when taken or refunded) in
// front of a concurrency limit, as sluice.All's doc recommends.
func rateThenSlots(t testing.TB, tokens, slots, queue int) (*rate.Bucket, *concurrency.Limiter, sluice.Limiter) {
	t.Helper()
	b, err := rate.NewBucket(rate.Config{Rate: 0, Burst: tokens})
	if err != nil {
		t.Fatal(err)
	}
	c, err := concurrency.New(concurrency.Config{Limit: slots, MaxQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	return b, c, sluice.All(b, c)
}

func TestAllAdmitsWhenEveryPartAdmits(t *testing.T) {
	b, c, all := rateThenSlots(t, 2, 1, 0)
	p, err := all.TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	if tk := b.Tokens(); tk != 1 {
		t.Errorf("bucket has %v tokens, want 1", tk)
	}
	if st := c.Stats(); st.InFlight != 1 {
		t.Errorf("concurrency in flight %d, want 1", st.InFlight)
	}
	if st := all.Stats(); st.InFlight != 1 || st.Admitted != 1 || st.Limit != 0 {
		t.Errorf("All stats = %+v, want 1 in flight, 1 admitted, limit 0", st)
	}
	p.Release(sluice.Success, time.Millisecond)
	p.Release(sluice.Success, time.Millisecond) // a second release does nothing
	if st := all.Stats(); st.InFlight != 0 {
		t.Errorf("All in flight %d after release, want 0", st.InFlight)
	}
	if st := c.Stats(); st.InFlight != 0 {
		t.Errorf("concurrency in flight %d after release, want 0", st.InFlight)
	}
	if tk := b.Tokens(); tk != 1 {
		t.Errorf("a Success release refunded the token: %v tokens, want 1", tk)
	}
}

// When the second part rejects, the first's token comes back: a per-client
// rate limit does not lose tokens because a global limit said no.
func TestAllRefundsWhenALaterPartRejects(t *testing.T) {
	b, c, all := rateThenSlots(t, 2, 1, 0)
	held, err := c.TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	for _, acquire := range []func() (sluice.Permit, error){
		all.TryAcquire,
		func() (sluice.Permit, error) { return all.Acquire(context.Background()) },
	} {
		if _, err := acquire(); !errors.Is(err, sluice.ErrLimit) {
			t.Fatalf("err = %v, want the concurrency limiter's ErrLimit", err)
		}
		if tk := b.Tokens(); tk != 2 {
			t.Fatalf("bucket has %v tokens after the rejection, want 2 (refunded)", tk)
		}
	}
	st := all.Stats()
	if st.Admitted != 0 || st.Rejected[sluice.ReasonLimit] != 2 || st.InFlight != 0 {
		t.Fatalf("All stats = %+v, want 2 rejections for reason limit", st)
	}
	held.Release(sluice.Success, 0)
}

// When the first part rejects, the later ones are never asked.
func TestAllStopsAtTheFirstRejection(t *testing.T) {
	b, c, all := rateThenSlots(t, 1, 1, 0)
	b.Allow() // the bucket's only token
	_, err := all.TryAcquire()
	if !errors.Is(err, sluice.ErrRate) {
		t.Fatalf("err = %v, want ErrRate", err)
	}
	if st := c.Stats(); st.Admitted != 0 || st.RejectedTotal() != 0 {
		t.Fatalf("concurrency limiter was asked: %+v", st)
	}
	if st := all.Stats(); st.Rejected[sluice.ReasonRate] != 1 {
		t.Fatalf("All stats = %+v, want 1 rate rejection", st)
	}
}

// A caller whose context ends while it waits in the second part's queue
// gets ctx.Err(), the first part's token back, and no rejection counted.
func TestAllCancelWhileWaitingRefunds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, c, all := rateThenSlots(t, 2, 1, 5)
		held, err := c.TryAcquire()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			_, err := all.Acquire(ctx)
			done <- err
		}()
		synctest.Wait()
		if st := all.Stats(); st.Queued != 1 {
			t.Fatalf("All queued = %d while waiting, want 1", st.Queued)
		}
		if tk := b.Tokens(); tk != 1 {
			t.Fatalf("bucket has %v tokens while waiting, want 1", tk)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if tk := b.Tokens(); tk != 2 {
			t.Fatalf("bucket has %v tokens after the cancel, want 2", tk)
		}
		if st := all.Stats(); st.RejectedTotal() != 0 || st.Queued != 0 {
			t.Fatalf("All stats = %+v, want no rejection, nobody queued", st)
		}
		held.Release(sluice.Success, 0)
	})
}

// A waiter in the second part is admitted when a slot frees, holding both.
func TestAllWaitsInALaterPart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, c, all := rateThenSlots(t, 2, 1, 5)
		held, err := all.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(time.Second)
			held.Release(sluice.Success, time.Second)
		}()
		start := time.Now()
		p, err := all.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("waited %v, want 1s", d)
		}
		if tk, st := b.Tokens(), c.Stats(); tk != 0 || st.InFlight != 1 {
			t.Errorf("tokens %v, in flight %d; want 0 and 1", tk, st.InFlight)
		}
		p.Cancel() // the work never ran: the token comes back too
		if tk := b.Tokens(); tk != 1 {
			t.Errorf("tokens %v after Cancel, want 1", tk)
		}
	})
}

// recorder is a Limiter that always admits and logs its releases, to see
// the order in which All releases its parts.
type recorder struct {
	name string
	log  *[]string
}

func (r recorder) Acquire(context.Context) (sluice.Permit, error) { return r.TryAcquire() }
func (r recorder) TryAcquire() (sluice.Permit, error)             { return sluice.NewPermit(r, 0), nil }
func (r recorder) Stats() sluice.Stats                            { return sluice.Stats{} }
func (r recorder) Release(_ uint64, o sluice.Outcome, d time.Duration) {
	*r.log = append(*r.log, fmt.Sprintf("%s:%v:%v", r.name, o, d))
}
func (r recorder) Cancel(uint64) { *r.log = append(*r.log, r.name+":cancel") }

// Parts are released in reverse order of acquisition, each with the
// outcome and latency of the whole; this holds past the four parts that fit
// in a permit's inline array too.
func TestAllReleasesInReverseOrder(t *testing.T) {
	for _, n := range []int{1, 4, 6} {
		t.Run(fmt.Sprint("parts=", n), func(t *testing.T) {
			var log []string
			var ls []sluice.Limiter
			var want []string
			for i := range n {
				ls = append(ls, recorder{fmt.Sprint(i), &log})
				want = append([]string{fmt.Sprintf("%d:dropped:7ms", i)}, want...)
			}
			p, err := sluice.All(ls...).TryAcquire()
			if err != nil {
				t.Fatal(err)
			}
			p.Release(sluice.Dropped, 7*time.Millisecond)
			if fmt.Sprint(log) != fmt.Sprint(want) {
				t.Fatalf("releases %v, want %v", log, want)
			}
		})
	}
}

// With more parts than the inline array holds, a rejection by the last
// still refunds every earlier one.
func TestAllManyPartsRefund(t *testing.T) {
	var bs []*rate.Bucket
	var ls []sluice.Limiter
	for i := range 6 {
		burst := 1
		if i == 5 {
			burst = 0 // the last part rejects
		}
		b, err := rate.NewBucket(rate.Config{Burst: burst})
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, b)
		ls = append(ls, b)
	}
	if _, err := sluice.All(ls...).TryAcquire(); !errors.Is(err, sluice.ErrRejected) {
		t.Fatalf("err = %v, want a rejection", err)
	}
	for i, b := range bs[:5] {
		if tk := b.Tokens(); tk != 1 {
			t.Errorf("part %d has %v tokens, want 1 (refunded)", i, tk)
		}
	}
}

// rejecter is a foreign Limiter whose rejections carry a reason this
// version of sluice does not know.
type rejecter struct{ reason sluice.Reason }

func (r rejecter) Acquire(context.Context) (sluice.Permit, error) { return r.TryAcquire() }
func (r rejecter) TryAcquire() (sluice.Permit, error) {
	return sluice.Permit{}, sluice.Reject(r.reason, 0)
}
func (r rejecter) Stats() sluice.Stats { return sluice.Stats{} }

func TestAllUnknownReasonDoesNotPanic(t *testing.T) {
	l := sluice.All(rejecter{sluice.NumReasons + 3})
	if _, err := l.TryAcquire(); !errors.Is(err, sluice.ErrRejected) {
		t.Fatalf("err = %v, want a rejection", err)
	}
	if st := l.Stats(); st.Admitted != 0 || st.InFlight != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

// Every rejection is counted, as the conformance suite's accounting wants
// (admitted + RejectedTotal = calls): one with ReasonUnknown, or with a
// reason this version does not know, under ReasonUnknown.
func TestAllCountsEveryRejection(t *testing.T) {
	for _, r := range []sluice.Reason{sluice.ReasonUnknown, sluice.NumReasons + 3} {
		l := sluice.All(rejecter{r})
		l.TryAcquire()
		l.Acquire(context.Background())
		if st := l.Stats(); st.RejectedTotal() != 2 || st.Rejected[sluice.ReasonUnknown] != 2 {
			t.Errorf("reason %v: Stats.Rejected = %v, want 2 under unknown", r, st.Rejected)
		}
	}
}

func TestAllOfNothingAdmits(t *testing.T) {
	p, err := sluice.All().TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	p.Release(sluice.Success, 0)
}

// Under -race: many goroutines through a rate limit and a concurrency limit;
// every token is either held by an admitted caller's work or back in the
// bucket, and never more than the concurrency limit run at once.
func TestAllConcurrent(t *testing.T) {
	const tokens, slots = 1000, 3
	b, c, all := rateThenSlots(t, tokens, slots, 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for range 8 {
		wg.Go(func() {
			for range 200 {
				p, err := all.TryAcquire()
				if err != nil {
					continue
				}
				if st := c.Stats(); st.InFlight > slots {
					t.Errorf("%d in flight, limit %d", st.InFlight, slots)
				}
				mu.Lock()
				admitted++
				mu.Unlock()
				p.Release(sluice.Success, 0)
			}
		})
	}
	wg.Wait()
	st := all.Stats()
	if int(st.Admitted) != admitted || st.InFlight != 0 {
		t.Fatalf("All stats = %+v, %d admitted", st, admitted)
	}
	if got := tokens - int(b.Tokens()); got != admitted {
		t.Fatalf("%d tokens used, %d callers admitted: rejected callers kept tokens", got, admitted)
	}
}

func ExampleAll() {
	perClient, _ := rate.NewBucket(rate.Config{Rate: 0, Burst: 2})
	global, _ := concurrency.New(concurrency.Config{Limit: 1})
	l := sluice.All(perClient, global) // the cheap, non-waiting limit first

	p, _ := l.TryAcquire()
	_, err := l.TryAcquire() // the global limit says no ...
	fmt.Println(err)
	fmt.Println("client tokens:", perClient.Tokens()) // ... and the client's token came back
	p.Release(sluice.Success, 10*time.Millisecond)

	st := l.Stats()
	fmt.Println("admitted:", st.Admitted, "rejected:", st.Rejected[sluice.ReasonLimit])
	// Output:
	// sluice: concurrency limit reached
	// client tokens: 1
	// admitted: 1 rejected: 1
}

// panicker is a Limiter whose Acquire panics, as a buggy one might.
type panicker struct{ recorder }

func (panicker) Acquire(context.Context) (sluice.Permit, error) { panic("boom") }
func (panicker) TryAcquire() (sluice.Permit, error)             { panic("boom") }

// A part that panics must not keep the earlier parts' permits: a server
// that recovers the panic would otherwise lose the slot for good.
func TestAllPanickingPartCancelsEarlierParts(t *testing.T) {
	var log []string
	slots, err := concurrency.New(concurrency.Config{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	all := sluice.All(slots, panicker{recorder{"p", &log}})
	for _, acquire := range []func(){
		func() { all.Acquire(context.Background()) },
		func() { all.TryAcquire() },
	} {
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Fatalf("recovered %v, want the part's panic", r)
				}
			}()
			acquire()
		}()
		if s := slots.Stats(); s.InFlight != 0 {
			t.Fatalf("%d permits of the first part held after the panic, want 0", s.InFlight)
		}
	}
}

// badRelease is a Limiter whose permits panic when released or cancelled,
// as a buggy one might.
type badRelease struct{ recorder }

func (b badRelease) Acquire(context.Context) (sluice.Permit, error) { return b.TryAcquire() }
func (b badRelease) TryAcquire() (sluice.Permit, error)             { return sluice.NewPermit(b, 0), nil }
func (badRelease) Release(uint64, sluice.Outcome, time.Duration)    { panic("boom") }
func (badRelease) Cancel(uint64)                                    { panic("boom") }

// A part whose Release or Cancel panics does not keep the other parts'
// permits: before, the parts before it in the composition (released after
// it) kept theirs, and a server that recovered the panic lost them.
func TestAllPanickingReleaseFreesTheOtherParts(t *testing.T) {
	for _, end := range []struct {
		name string
		do   func(*sluice.Permit)
		want []string
	}{
		{"release", func(p *sluice.Permit) { p.Release(sluice.Success, time.Millisecond) }, []string{"b:success:1ms", "a:success:1ms"}},
		{"cancel", (*sluice.Permit).Cancel, []string{"b:cancel", "a:cancel"}},
	} {
		t.Run(end.name, func(t *testing.T) {
			var log []string
			all := sluice.All(recorder{"a", &log}, badRelease{recorder{"x", &log}}, recorder{"b", &log})
			p, err := all.TryAcquire()
			if err != nil {
				t.Fatal(err)
			}
			func() {
				defer func() {
					if r := recover(); r != "boom" {
						t.Fatalf("recovered %v, want the part's panic", r)
					}
				}()
				end.do(&p)
			}()
			if !slices.Equal(log, end.want) {
				t.Errorf("parts given back: %q, want %q", log, end.want)
			}
			if s := all.Stats(); s.InFlight != 0 {
				t.Errorf("All holds %d in flight after the panic, want 0", s.InFlight)
			}
		})
	}
}

// A rejection by a part costs the composition no allocation: under
// overload, rejecting is what it does most.
func TestAllRejectionDoesNotAllocate(t *testing.T) {
	lim, err := concurrency.New(concurrency.Config{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	held, err := lim.TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(sluice.Success, 0)
	open, err := concurrency.New(concurrency.Config{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	all := sluice.All(open, lim)
	n := testing.AllocsPerRun(100, func() {
		if _, err := all.TryAcquire(); !errors.Is(err, sluice.ErrLimit) {
			t.Fatalf("TryAcquire = %v, want a limit rejection", err)
		}
	})
	if n != 0 {
		t.Errorf("a rejected composition allocates %v times", n)
	}
	if s := open.Stats(); s.InFlight != 0 {
		t.Errorf("the first part kept %d permits after the second rejected", s.InFlight)
	}
}

// A nil limiter (an optional limit left unset), or a nil pointer to one, is no limit: All skips it
// rather than panicking on the first request or the first Stats scrape.
func TestAllSkipsNilLimiters(t *testing.T) {
	_, c, _ := rateThenSlots(t, 1, 1, 0)
	var unset *rate.Bucket // a nil pointer: it used to panic at the first request
	for _, l := range []sluice.Limiter{sluice.All(nil, c, nil), sluice.All(nil), sluice.All(unset, c), sluice.All(unset)} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("All with a nil limiter panics: %v", r)
				}
			}()
			p, err := l.TryAcquire()
			if err != nil {
				t.Fatal(err)
			}
			p.Release(sluice.Success, 0)
			p, err = l.Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			p.Cancel()
			if st := l.Stats(); st.Admitted != 2 || st.InFlight != 0 {
				t.Fatalf("stats = %+v, want 2 admitted, none in flight", st)
			}
		}()
	}
}

// A limiter given twice is one limit, asked once: a request must not hold
// two of its slots, or wait in its queue for a slot it holds itself.
func TestAllDuplicateLimiterCountsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, c, _ := rateThenSlots(t, 2, 1, 5)
		l := sluice.All(b, c, b, c)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		p, err := l.Acquire(ctx)
		if err != nil {
			t.Fatalf("Acquire of an idle limit given twice = %v, want admission", err)
		}
		if tk, st := b.Tokens(), c.Stats(); tk != 1 || st.InFlight != 1 {
			t.Errorf("tokens %v, in flight %d; want 1 token taken and 1 slot held", tk, st.InFlight)
		}
		p.Release(sluice.Success, 0)
		if p, err = l.TryAcquire(); err != nil {
			t.Fatalf("TryAcquire = %v, want the bucket's second token", err)
		}
		p.Release(sluice.Success, 0)
	})
}

// Limiters of a type that == cannot compare are kept, not compared.
func TestAllUncomparableLimiters(t *testing.T) {
	var log []string
	a, b := uncomparable{recorder{"a", &log}, nil}, uncomparable{recorder{"b", &log}, nil}
	p, err := sluice.All(a, b, a).TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	p.Release(sluice.Success, 0)
	if len(log) != 3 {
		t.Fatalf("releases %v, want all three parts", log)
	}
}

type uncomparable struct {
	recorder
	_ []int
}

// The composition's rejection is the rejecting part's error, hint and all:
// the first part to reject, since the later ones are not asked.
func TestAllRejectionIsTheRejectingParts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spent := func(rps float64) *rate.Bucket {
			b, err := rate.NewBucket(rate.Config{Rate: rps, Burst: 1})
			if err != nil {
				t.Fatal(err)
			}
			b.Allow()
			return b
		}
		full, err := rate.NewBucket(rate.Config{Rate: 1, Burst: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			l    sluice.Limiter
			want time.Duration
		}{
			{sluice.All(full, spent(0.1)), 10 * time.Second},
			{sluice.All(spent(1), spent(0.1)), time.Second},
		} {
			_, err := c.l.TryAcquire()
			if d, ok := sluice.RetryAfter(err); !ok || d != c.want || !errors.Is(err, sluice.ErrQuota) {
				t.Errorf("err = %v: RetryAfter %v, %v; want %v, a quota rejection", err, d, ok, c.want)
			}
		}
		if tk := full.Tokens(); tk != 1 {
			t.Errorf("the admitting part has %v tokens, want 1 (refunded)", tk)
		}
	})
}
