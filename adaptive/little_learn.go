package adaptive

// How a Little limit learns the service it limits: its no-load latency
// and a concurrency known to run at it (see the type's doc), and the
// check that tells a slower service from a queue after a cut.

// checkCut tells a slower service from a queue after a cut, by Little's
// law: in flight = throughput × latency. Cutting a queue leaves the
// throughput as it was (the workers stay busy), so the latency falls in
// proportion to the in flight; if it does not, the throughput fell with
// the in flight, which happens only below the service's concurrency, where
// nothing queues: the latency is the no-load latency of a service that
// slowed.
func (l *Little) checkCut(win stat, inFlight float64) {
	from, lat := l.cutFrom, l.cutLat
	l.cutFrom = 0
	if inFlight > from*(1-l.headroom/2) {
		return // the in flight did not fall: the cut was not in use
	}
	latency, low := win.mean(), win.mean()-2*win.se()
	if low > lat*inFlight/from*(1+l.headroom) && low > l.noLoad*(1+l.headroom) {
		l.noLoad, l.last = latency, latency
		// knownAt is back where it was: the workers did not change, only
		// their speed, and what starts at knownAt/2 in flight or fewer
		// goes on telling noLoad (one window's mean may be off: this one
		// started with the in flight falling, which finishes the short
		// requests first).
		l.knownAt = max(l.knownAt, l.cutKnownAt)
		l.known, l.above = stat{}, stat{}
		// The cuts were made against the old noLoad: the limit goes back
		// to the service's concurrency the window before them shows with
		// the new one (its throughput × noLoad).
		l.limit = l.bounds.clamp(max(l.limit, from*min(latency/lat, 1)))
	}
}

// probe halves the limit: the first windows were saturated, and their
// latency may carry a queue the initial limit let in. While the latency
// falls with the limit it was a queue, and the halving goes on; once it
// does not, it is the no-load latency. At MinLimit there is nothing left
// to halve: the probe ends there, with this latency as noLoad. (It went on
// "halving" MinLimit to itself, each window a probe, and a limit that
// probes neither learns nor grows: it stayed at MinLimit for good, even
// after the service grew forty-fold.)
func (l *Little) probe(latency float64) {
	l.noLoad, l.last = latency, latency
	half := l.bounds.clamp(l.limit / 2)
	if half >= l.limit {
		l.probeFrom, l.skip = 0, false
		return
	}
	l.probeFrom, l.skip = l.limit, true
	l.limit = half
	l.knownAt = min(l.knownAt, l.limit)
}

// learn updates noLoad and knownAt from the closed window's latencies (win,
// and known: those that started at knownAt/2 in flight or fewer) and the
// pooled evidence (see the type's doc).
func (l *Little) learn(win, known stat) {
	l.last = win.mean()
	if win.mean()+2*win.se() < l.noLoad*(1-l.headroom) {
		// Faster, queue included: the service sped up, if the next
		// window says so too (one window can hold only the fast requests
		// of a service whose slow ones are still running).
		l.faster++
		l.fastSum.merge(win)
		if l.faster >= 2 {
			l.noLoad = l.fastSum.mean()
			l.known, l.above = stat{}, stat{}
			l.faster, l.fastSum = 0, stat{}
		}
		return
	}
	l.faster, l.fastSum = 0, stat{}
	l.known.merge(known)
	if l.known.firm(littleKnown, littleKnownMax) {
		m := l.known.mean()
		if m-2*l.known.se() > l.noLoad*(1+l.headroom) {
			l.noLoad = m // slower where nothing queued: the service slowed
		} else {
			l.noLoad += (m - l.noLoad) / 2
		}
		l.known = stat{}
	}
	if l.above.firm(2*littleEvidence, 4*littleWindowMax) {
		if l.above.mean()+2*l.above.se() <= l.noLoad*(1+l.headroom/2) {
			l.knownAt = min(l.knownAt+1+l.knownAt/8, l.limit/(1+l.headroom))
		}
		l.above = stat{}
	}
}
