//go:build race

package keyed_test

// raceOn shortens the floods of distinct keys, as -short does: they run one
// goroutine, so the race detector finds nothing in them, and it makes each
// key about fifty times slower (30 s a million).
const raceOn = true
