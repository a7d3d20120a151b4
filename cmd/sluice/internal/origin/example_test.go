package origin_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/origin"
	"github.com/sluicehq/sluice/sim"
)

// Seed 003's origin, a twentieth of the time: 7 workers at 1 s (50 ms
// scaled), a queue of 100, and the slowdown to 2 s at 60 s (3 s scaled).
func Example() {
	s, err := origin.New(origin.Config{
		TimeScale: 0.05,
		Origin: sim.Origin{
			Workers: 7,
			Queue:   100,
			Service: sim.Dist{Kind: sim.Constant, Mean: time.Second},
			Changes: []sim.Change{{At: time.Minute, Service: sim.Dist{Kind: sim.Constant, Mean: 2 * time.Second}}},
		},
	})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	srv := httptest.NewServer(s.Handler()) // the origin, and /metrics
	defer srv.Close()

	resp, err := http.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("%d %s", resp.StatusCode, body)
	fmt.Printf("capacity %.0f/s, served %d\n", s.Capacity(), s.Stats().Served)
	// Output:
	// 200 OK
	// capacity 140/s, served 1
}
