package adaptive

import (
	"container/heap"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// littleFeed drives a Little by hand: demand requests in flight, capped by
// the limit, against a service of workers workers that answers in noLoad
// while in flight ≤ workers. Above it, the requests past the workers are
// Dropped (their client gave up in the service's queue), or with queue
// set every request waits: noLoad × in flight / workers. Samples come at
// the throughput the in flight and latency give.
type littleFeed struct {
	l       *Little
	now     time.Time
	noLoad  time.Duration
	workers int
	queue   bool
	i       int
}

// run feeds samples for d, or until more returns false (nil: never).
func (f *littleFeed) run(d time.Duration, demand int, more func() bool) {
	for end := f.now.Add(d); f.now.Before(end); f.i++ {
		if more != nil && !more() {
			return
		}
		n := min(demand, f.l.Limit())
		latency := f.noLoad
		s := Sample{Latency: latency, InFlight: n, Outcome: sluice.Success}
		switch {
		case n <= f.workers:
		case f.queue:
			latency = f.noLoad * time.Duration(n) / time.Duration(f.workers)
			s.Latency = latency
		case f.i%n < n-f.workers:
			s = Sample{Latency: 2 * f.noLoad, InFlight: n, Outcome: sluice.Dropped}
		}
		f.now = f.now.Add(latency / time.Duration(n))
		f.l.Observe(f.now, s)
	}
}

// unusedAtFive is a default Little that learned noLoad from 20 s at 5 in
// flight, under its initial limit of 20 that no request reached, against
// a service of 7 workers of 100 ms (queue: see littleFeed).
func unusedAtFive(t *testing.T, queue bool) (*Little, *littleFeed) {
	t.Helper()
	l, err := NewLittle(LittleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	f := &littleFeed{l: l, now: epoch, noLoad: 100 * time.Millisecond, workers: 7, queue: queue}
	f.run(20*time.Second, 5, nil)
	if l.NoLoadLatency() == 0 || l.Limit() != 20 {
		t.Fatalf("after 20 s at 5 in flight: limit %d, noLoad %v; want the initial 20 and noLoad learned", l.Limit(), l.NoLoadLatency())
	}
	return l, f
}

// Seed 003's slowdown, where the limit is not in use when it comes: 5 in
// flight under a limit of 20, then demand brings 10 to a service that
// runs 7. The drops cut the limit from the 10 in flight that lost them,
// not from the 20 no request reached: cutting that to 18 changes nothing,
// and the service's queue goes on timing requests out.
func TestLittleDropsCutFromTheInFlightWhenTheLimitIsUnused(t *testing.T) {
	l, f := unusedAtFive(t, false)
	f.run(10*time.Second, 10, func() bool { return l.Limit() == 20 })
	if got := l.Limit(); got > 9 {
		t.Errorf("limit %d after the first window of drops at 10 in flight, want at most 0.9 × 10", got)
	}
}

// What lost the requests is the in flight they started at, not the
// window's highest: on seed 003 the requests that time out start at 8 and
// 9 in flight while the window reaches 10, and a cut from 10 leaves 9,
// two more than the service's 7 workers.
func TestLittleDropsCutFromTheInFlightTheyStartedAt(t *testing.T) {
	l, f := unusedAtFive(t, false)
	for i := 0; l.Limit() == 20 && i < 1000; i++ {
		s := Sample{Latency: f.noLoad, InFlight: 10, Outcome: sluice.Success}
		if i%4 == 0 {
			s = Sample{Latency: 2 * f.noLoad, InFlight: 8, Outcome: sluice.Dropped}
		}
		f.now = f.now.Add(10 * time.Millisecond)
		l.Observe(f.now, s)
	}
	if got := l.Limit(); got > 7 {
		t.Errorf("limit %d after a window whose drops started at 8 in flight, want at most 0.9 × 8", got)
	}
}

// The same without drops: the clients wait, and the queue shows in the
// latency. A queue at 10 in flight says the service runs about 7 at once,
// whatever the limit no request reached: the limit is cut to the
// concurrency it shows (× (1 + Headroom)), not left at 20.
func TestLittleQueueCutsAnUnusedLimit(t *testing.T) {
	l, f := unusedAtFive(t, true)
	f.run(10*time.Second, 10, func() bool { return l.Limit() == 20 })
	if got := l.Limit(); got < 7 || got > 9 {
		t.Errorf("limit %d after the first window with a queue at 10 in flight, want 7 × 1.15 (7 to 9)", got)
	}
}

// sevenWorkers is a Little at 7 against a service of 7 workers of 100 ms
// whose clients give up on anything that queues: every probe from 7 to 8
// loses requests.
func sevenWorkers(t *testing.T) (*Little, *littleFeed) {
	t.Helper()
	l, err := NewLittle(LittleConfig{InitialLimit: 7})
	if err != nil {
		t.Fatal(err)
	}
	return l, &littleFeed{l: l, now: epoch, noLoad: 100 * time.Millisecond, workers: 7}
}

// Seven workers (sevenWorkers): each loss at the same ceiling quarters the
// growth near it, so the losses come further and further apart instead of
// once every eight windows for ever.
func TestLittleProbesASameCeilingLessOften(t *testing.T) {
	l, f := sevenWorkers(t)
	var losses []time.Time
	prev := l.Limit()
	f.run(2*time.Hour, 20, func() bool {
		if lim := l.Limit(); lim < prev && prev > 7 {
			losses = append(losses, f.now)
		}
		prev = l.Limit()
		return len(losses) < 6
	})
	if len(losses) < 6 {
		t.Fatalf("%d losses in two hours, want 6 (the limit probes past the 7 workers)", len(losses))
	}
	first, last := losses[1].Sub(losses[0]), losses[5].Sub(losses[4])
	t.Logf("between the first two losses %v, between the last two %v", first, last)
	// After the third loss the growth near 7 is a 16th of the first
	// (a 128th of a request per window, not an eighth); the windows of
	// the loss itself and of the cut take as long as before (13.9 times
	// further apart here; halving for each loss gave 3.8).
	if last < 8*first {
		t.Errorf("losses %v apart at first and %v after five, want at least 8 times further apart", first, last)
	}
}

// The same service: near the ceiling the limit grows by an eighth of a
// request per window, and by a quarter of that for each loss in a row at
// the same ceiling. Each probe past it costs a request; halving instead
// (a 16th after one loss) left seed 003's slow service probing often
// enough to lose 1.2% of what it admitted.
func TestLittleProbesNearTheCeilingSlowly(t *testing.T) {
	l, f := sevenWorkers(t)
	steps, prev := 0, l.limit
	f.run(2*time.Hour, 20, func() bool {
		if l.ceiling > 0 && l.limit > prev && prev > l.ceiling-1 {
			if l.lost > 0 {
				steps++
			}
			want := 1 / (8 * math.Pow(4, float64(l.lost)))
			if grew := l.limit - prev; grew > want+1e-9 {
				t.Errorf("the limit grew by %.4f requests in a window from %.3f, near the ceiling %.3f after %d losses there; want at most %.4f", grew, prev, l.ceiling, l.lost, want)
			}
		}
		prev = l.limit
		return steps < 20
	})
	if steps < 20 {
		t.Fatalf("%d windows of growth near the ceiling after a loss there in two hours, want 20; the test no longer tells what it should", steps)
	}
}

// The same service: once a probe past 7 has lost, the next probe's first
// drop ends it. Waiting for a window's second drop (a drop now and then
// is the service's own tail) lost one more request per service time on
// seed 003, where a request queued behind the 7 workers outlives its
// client.
func TestLittleProbeEndsAtItsFirstLoss(t *testing.T) {
	l, f := sevenWorkers(t)
	var probes []int // drops fed while the limit was past 7, per probe
	drops, probing := 0, false
	f.run(2*time.Hour, 20, func() bool {
		n := l.Limit()
		switch {
		case n > 7 && !probing:
			probing, drops = true, 0
		case n <= 7 && probing:
			probing = false
			probes = append(probes, drops)
		}
		if n > f.workers && f.i%n < n-f.workers {
			drops++ // the sample run feeds next is a drop
		}
		return len(probes) < 4
	})
	if len(probes) < 4 {
		t.Fatalf("%d probes in two hours, want 4", len(probes))
	}
	// The first probe has no ceiling yet: a window of drops cuts it.
	for i, d := range probes[1:] {
		if d != 1 {
			t.Errorf("probe %d lost %d requests before the limit fell back to 7, want 1 (all: %v)", i+2, d, probes)
		}
	}
}

// A drop of the service's own tail is not a probe that lost: after a cut,
// a service that drops one request in 20 at any in flight (below the
// tenth a window needs to back off) keeps the limit the cut left. When
// any drop of a request started above the last losing limit less one
// ended a "probe", a small limit was cut at each: a cut of 0.9 from 2.5
// leaves 2.25, whose requests start at 2 in flight, above 1.5; then
// 2.02 and 1.82. On seed 003 with a lognormal service whose slow
// tail outlives the clients, that held the limit at 1 or 2 of 7 workers.
func TestLittleTailDropsAfterACutAreNotProbes(t *testing.T) {
	l, err := NewLittle(LittleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	now, i := epoch, 0
	feed := func(s Sample) {
		i++
		now = now.Add(50 * time.Millisecond)
		l.Observe(now, s)
	}
	ok := func(inFlight int) Sample {
		return Sample{Latency: 100 * time.Millisecond, InFlight: inFlight, Outcome: sluice.Success}
	}
	drop := func(inFlight int) Sample {
		return Sample{Latency: 400 * time.Millisecond, InFlight: inFlight, Outcome: sluice.Dropped}
	}
	for l.NoLoadLatency() == 0 {
		feed(ok(3)) // 3 in flight under the initial 20: unused
	}
	// Two drops in a window of twelve, started at 3 and 2 in flight,
	// cut the unused limit to 0.9 × 2.5.
	for n := 0; l.Limit() == 20 && n < 1000; n++ {
		switch n % 12 {
		case 5:
			feed(drop(3))
		case 11:
			feed(drop(2))
		default:
			feed(ok(3))
		}
	}
	cut := l.Limit()
	if cut != 2 {
		t.Fatalf("limit %d after the drops, want 2 (0.9 × 2.5); the test no longer tells what it should", cut)
	}
	low := cut
	for end := now.Add(10 * time.Minute); now.Before(end); {
		n := min(3, l.Limit())
		if i%20 == 0 {
			feed(drop(n))
		} else {
			feed(ok(n))
		}
		low = min(low, l.Limit())
	}
	if low < cut {
		t.Errorf("the limit fell from %d to %d under a twentieth of drops, below the tenth that backs off", cut, low)
	}
}

// tailFeed drives a Little against a service whose clients give up on
// one request in every dropEvery (its own tail, at any in flight), with
// demand requests that want to be in flight: those the limit keeps out
// wait (Sample.Waiting). Samples come at the rate the in flight and the
// mean latency give.
type tailFeed struct {
	l       *Little
	now     time.Time
	i       int
	demand  int
	latency func(i int) time.Duration // of the i-th sample
	mean    time.Duration             // of latency
	giveUp  time.Duration             // a Dropped sample's latency: the clients' deadline
}

func newTailFeed(t *testing.T, demand int, mean, giveUp time.Duration, latency func(i int) time.Duration) *tailFeed {
	t.Helper()
	l, err := NewLittle(LittleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return &tailFeed{l: l, now: epoch, demand: demand, latency: latency, mean: mean, giveUp: giveUp}
}

func (f *tailFeed) feed(dropEvery int) {
	f.i++
	n := min(f.demand, f.l.Limit())
	s := Sample{Latency: f.latency(f.i), InFlight: n, Waiting: f.demand - n, Outcome: sluice.Success}
	if f.i%dropEvery == 0 {
		s = Sample{Latency: f.giveUp, InFlight: n, Outcome: sluice.Dropped}
	}
	f.now = f.now.Add(f.mean / time.Duration(n))
	f.l.Observe(f.now, s)
}

// A large service's tail does not end its probes: after a window of drops
// cut the limit from the 150 in flight demand brought, a service of 200
// workers whose clients give up on one request in 100 (its own tail, at
// any in flight) lets the limit grow back past 150. When one drop among a
// probe's requests ended it, each probe at 150 met one within a few
// windows, and the limit stayed at 150 or below for good.
func TestLittleTailDropsDoNotEndALargeProbe(t *testing.T) {
	f := newTailFeed(t, 150, 100*time.Millisecond, 400*time.Millisecond, func(int) time.Duration { return 100 * time.Millisecond })
	l, feed := f.l, f.feed
	for end := f.now.Add(time.Minute); f.now.Before(end); {
		feed(1 << 30)
	}
	if l.Limit() <= 150 {
		t.Fatalf("limit %d after a minute below the workers, want it grown past the 150 in demand; the test no longer tells what it should", l.Limit())
	}
	for end := f.now.Add(time.Minute); l.ceiling == 0 && f.now.Before(end); {
		feed(3) // a third dropped: a window of them cuts the limit
	}
	if l.Limit() >= 150 || l.ceiling == 0 {
		t.Fatalf("limit %d, ceiling %.1f after the drops, want a cut; the test no longer tells what it should", l.Limit(), l.ceiling)
	}
	for end := f.now.Add(5 * time.Minute); f.now.Before(end); {
		feed(100)
	}
	if got := l.Limit(); got <= 150 {
		t.Errorf("limit %d after 5 minutes of a 1%% tail, want past the 150 it was cut from (ceiling %.1f)", got, l.ceiling)
	}
}

// A limit that drops of the service's own tail (here half its requests,
// which brings the limit to 2 within minutes) cut to a fraction of what
// the service is known to run comes back once they stop. The service is
// slow (1 s, ±30%) and the limit small, so a window of 16 successes takes
// 16 s, and its mean latency reads noLoad only within a noise larger
// than Headroom/2: with requests waiting at no more than knownAt/2 in
// flight, the limit grows without that test, from windows of 8, and the
// drops it lost at there set no ceiling.
func TestLittleComesBackFromTailDrops(t *testing.T) {
	f := newTailFeed(t, 10, time.Second, 2500*time.Millisecond, func(i int) time.Duration { return time.Duration(700+300*(i%3)) * time.Millisecond })
	l, feed := f.l, f.feed
	for end := f.now.Add(2 * time.Minute); f.now.Before(end); {
		feed(1 << 30) // 10 in flight under the initial 20: noLoad and knownAt
	}
	for end := f.now.Add(5 * time.Minute); l.Limit() > 2 && f.now.Before(end); {
		feed(2) // half dropped, the service's own tail
	}
	if l.Limit() > 2 {
		t.Fatalf("limit %d after 5 minutes of half dropped, want 2 or less; the test no longer tells what it should", l.Limit())
	}
	start := f.now
	for end := f.now.Add(10 * time.Minute); l.Limit() < 5 && f.now.Before(end); {
		feed(1 << 30)
	}
	took := f.now.Sub(start)
	t.Logf("back to 5 in %v", took)
	if took > time.Minute {
		t.Errorf("back to 5 (knownAt/2) in %v after the drops stopped, want within a minute", took)
	}
	if l.ceiling != 0 {
		t.Errorf("ceiling %.2f after drops at 2 in flight, want none: they did not queue", l.ceiling)
	}
}

// Seed 003 in the small, started below the workers: a limit of 5 on a
// constant service of 7 workers that slows from 1 s to 2 s. The window
// that holds the change mixes 1 s and 2 s; the ones after it are
// constant again, and must close as soon as a constant service's do (two
// mean latencies), not after sixteen, or the limit that the slower
// service's latency cuts stays cut for half a minute.
func TestLittleFollowsAConstantServiceThatSlowed(t *testing.T) {
	l, err := NewLittle(LittleConfig{InitialLimit: 5})
	if err != nil {
		t.Fatal(err)
	}
	f := &littleFeed{l: l, now: epoch, noLoad: time.Second, workers: 7}
	f.run(2*time.Minute, 5, nil)
	f.noLoad = 2 * time.Second
	slow := f.now
	cut := false
	f.run(5*time.Minute, 7, func() bool {
		cut = cut || l.Limit() < 5
		return !cut || l.Limit() < 7
	})
	if !cut {
		t.Fatalf("the limit never fell below 5 after the slowdown; the test no longer tells what it should")
	}
	took := f.now.Sub(slow)
	t.Logf("back to the 7 workers %v after the slowdown", took)
	if took > 40*time.Second {
		t.Errorf("back to the 7 workers %v after the slowdown, want within 40 s", took)
	}
}

// A constant service's change can mix two windows in a row: the one that
// holds it, and the next when a cut leaves requests queued at the service.
// The window after them is constant again and must close as a constant
// service's do (8 successes over two mean latencies), not wait for 16
// over sixteen: on seed 003 that held a cut limit for half a minute.
func TestLittleConstantServiceOutlivesTwoMixedWindows(t *testing.T) {
	l, err := NewLittle(LittleConfig{InitialLimit: 10})
	if err != nil {
		t.Fatal(err)
	}
	now := epoch
	feed := func(latency time.Duration) {
		now = now.Add(25 * time.Millisecond)
		l.Observe(now, Sample{Latency: latency, InFlight: 5, Outcome: sluice.Success})
	}
	// closes feeds until the open window closes, and returns how many
	// samples it took.
	closes := func(latency func(i int) time.Duration) int {
		start := l.win.start
		for i := 1; i <= 10000; i++ {
			feed(latency(i))
			if l.win.start != start {
				return i
			}
		}
		t.Fatal("no window closed in 10000 samples")
		return 0
	}
	constant := func(int) time.Duration { return 100 * time.Millisecond }
	for l.NoLoadLatency() == 0 {
		feed(100 * time.Millisecond)
	}
	// To a window's start. The first estimate's window was tight, so the
	// service counts as constant from here.
	closes(constant)
	if n := closes(constant); n >= littleFew {
		t.Fatalf("a constant window took %d samples, want fewer than %d; the test no longer tells what it should", n, littleFew)
	}
	mixed := func(i int) time.Duration { return time.Duration(100+50*(i%2)) * time.Millisecond }
	for range 2 {
		if n := closes(mixed); n < littleFew {
			t.Fatalf("a mixed window took %d samples, want %d or more", n, littleFew)
		}
	}
	if n := closes(constant); n >= littleFew {
		t.Errorf("the first constant window after two mixed ones took %d samples, want fewer than %d", n, littleFew)
	}
}

// The first estimate comes early from a constant service: 128 successes
// within 5% of each other over 32 mean latencies, where a lognormal or
// bimodal one needs 256. At 5 rps of 1 s that is 32 s, not 51 s: seed
// 003 through the proxy with Little started at 5 took its first estimate
// across the slowdown at 60 s, which its start-up probe read as the
// limit's own queue.
func TestLittleFirstEstimateOfAConstantService(t *testing.T) {
	l, err := NewLittle(LittleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	f := &littleFeed{l: l, now: epoch, noLoad: time.Second, workers: 7}
	f.run(time.Minute, 5, func() bool { return l.NoLoadLatency() == 0 })
	if took := f.now.Sub(epoch); l.NoLoadLatency() != time.Second || took > 35*time.Second {
		t.Errorf("first no-load estimate %v after %v, want 1s within 35 s", l.NoLoadLatency(), took)
	}
}

// But a service with a slow mode must not pass
// for constant because its first slow requests have not finished yet:
// 90% of 10 ms, 10% of 100 ms (mean 19 ms), sent every 2 ms, with no
// slow one among the first 50 sent (100 ms of bad luck, as a Poisson
// draw gives now and then).
func TestLittleFirstEstimateWaitsForASlowMode(t *testing.T) {
	l, err := NewLittle(LittleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	type done struct {
		at  time.Time
		lat time.Duration
	}
	var finished []done
	for i := range 5000 {
		lat := 10 * time.Millisecond
		if i >= 50 && i%10 == 0 {
			lat = 100 * time.Millisecond
		}
		start := epoch.Add(time.Duration(i) * 2 * time.Millisecond)
		finished = append(finished, done{start.Add(lat), lat})
	}
	slices.SortFunc(finished, func(a, b done) int { return a.at.Compare(b.at) })
	for _, d := range finished {
		l.Observe(d.at, Sample{Latency: d.lat, InFlight: 10, Outcome: sluice.Success})
		if l.NoLoadLatency() != 0 {
			break
		}
	}
	if got := l.NoLoadLatency(); got < 15*time.Millisecond {
		t.Errorf("first no-load estimate %v, want the service's mean (about 19 ms), not its fast mode's 10 ms", got)
	}
}

// Workers return to a service whose limit was cut for losing them: the
// requests that wait for a permit now run at noLoad, but the window open
// at the return began with the queue the lost workers left. Its mean
// mixes the two and does not show the limit holding demand back, and a
// noisy service's window waits for 120 successes to be firm while the
// limit's queue overflows. The first block of 64 successes after the
// return shows it alone, and grows the limit there.
func TestLittleGrowsFromTheBlockAfterTheWorkersReturn(t *testing.T) {
	l, err := NewLittle(LittleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	noLoad := 20 * time.Millisecond
	l.noLoad, l.last, l.knownAt, l.limit = float64(noLoad), float64(noLoad), 17.6, 12
	now := epoch
	// Latencies alternate either side of their mean: by 55% at noLoad,
	// where 64 of them read below (1 + Headroom/2) × noLoad by a standard
	// error, and by 80% with the queue.
	feed := func(mean time.Duration, spread float64, n int) {
		for i := range n {
			lat := time.Duration(float64(mean) * (1 + spread*float64(1-2*(i%2))))
			now = now.Add(mean / 12)
			l.Observe(now, Sample{Latency: lat, InFlight: 12, Waiting: 30, Outcome: sluice.Success})
		}
	}
	feed(noLoad*5/4, 0.8, 64) // the lost workers' queue
	feed(noLoad, 0.55, 64)    // they are back
	if got := l.Limit(); got < 13 {
		t.Errorf("limit %d after 64 successes at noLoad with requests waiting, want grown from 12 by 1 + Headroom", got)
	}
}

// A start-up probe that halves the limit down to MinLimit ends there: the
// latency at the floor is noLoad, and the limit grows when the service
// does. It used to go on "halving" MinLimit to itself, every window a
// probe, and a probing limit neither learns nor grows: on this service (5
// workers, then 200 from 30 s) it stayed at MinLimit, 10, for the whole
// three minutes.
func TestLittleProbeEndsAtMinLimit(t *testing.T) {
	const base = 10 * time.Millisecond
	l, err := NewLittle(LittleConfig{MinLimit: 10})
	if err != nil {
		t.Fatal(err)
	}
	workers := func(now time.Time) int {
		if now.Sub(epoch) < 30*time.Second {
			return 5
		}
		return 200
	}
	var h pendingHeap
	inFlight, now := 0, epoch
	fill := func() {
		for inFlight < l.Limit() {
			inFlight++
			lat := time.Duration(float64(base) * max(1, float64(inFlight)/float64(workers(now))))
			heap.Push(&h, pending{end: now.Add(lat), latency: lat, inFlight: inFlight, outcome: sluice.Success})
		}
	}
	fill()
	for len(h) > 0 {
		p := heap.Pop(&h).(pending)
		if p.end.After(epoch.Add(3 * time.Minute)) {
			break
		}
		now = p.end
		inFlight--
		l.Observe(now, Sample{Latency: p.latency, InFlight: p.inFlight, Outcome: sluice.Success})
		fill()
	}
	if l.Limit() < 200 {
		t.Errorf("limit %d three minutes in, 2.5 after the service grew to 200 workers (probing from %v); want at least 200", l.Limit(), l.probeFrom)
	}
}
