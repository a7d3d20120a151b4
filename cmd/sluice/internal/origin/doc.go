// Package origin is a real HTTP server that behaves like the simulator's
// modeled origin (sim.Origin), so that an experiment run on loopback sockets
// and the same experiment run in virtual time describe the same service.
//
// A Server has Workers that serve one request at a time, each for a time
// drawn from a service-time distribution (constant, exponential, lognormal,
// bimodal: the simulator's); a request that finds every worker busy waits
// in a FIFO queue (bounded, unbounded, or absent: Queue 0) or is refused
// with 503 when it is full. Changes alter the workers or the distribution
// at given times after New (seed 003's slowdown). An optional origin
// Timeout answers 504 for a request held that long (a queued one leaves the
// queue, one in service keeps its worker until its work is done), and an
// optional ErrorRate answers 500 for that fraction of the served requests.
//
// Like the simulator's origin, a Server does not know that a client gave up:
// a request whose client disconnected is still queued and served (wasted
// work, as in seed 003). Only Close cuts the waits short.
//
// TimeScale multiplies every duration of the model (service times, change
// times, the timeout): 0.05 turns seed 003's 1 s of work into 50 ms, so a
// lab run keeps the ratios and takes a twentieth of the time.
//
// A Server is an http.Handler; Handler adds /metrics, the Prometheus
// exposition of its own registry (in service, queued, workers, answers by
// result, the time each request spent in the origin). Stats returns the
// same figures, plus the most requests ever inside the handler at once
// (MaxInFlight), which tests of limiters in front of an origin check.
package origin
