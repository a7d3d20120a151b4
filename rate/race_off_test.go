//go:build !race

package rate

const raceOn = false
