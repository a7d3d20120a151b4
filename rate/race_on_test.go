//go:build race

package rate

// raceOn shortens the stress tests: the race detector slows each call
// about fifty times.
const raceOn = true
