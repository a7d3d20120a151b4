// Package bench compares sluice with other Go limiters, side by side in one
// run. It is a separate module so that the sluice module never depends on a
// competitor. Run it with `make bench` from the repository root; the figures
// and the exact commands are recorded in docs/benchmarks.md.
package bench
