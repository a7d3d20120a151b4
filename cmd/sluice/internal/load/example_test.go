package load_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/load"
	"github.com/sluicehq/sluice/sim"
)

// 100 requests per second for half a second, each with 1 s to answer.
func ExampleRun() {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()

	res, err := load.Run(context.Background(), load.Config{
		URL:      srv.URL,
		Load:     sim.Load{Rate: 100, Timeout: time.Second},
		Duration: 500 * time.Millisecond,
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("planned %d, sent %d, skipped %d, 2xx %d\n", res.Planned, res.Sent, res.Skipped, res.OK)
	fmt.Printf("goodput %.0f/s of %.0f/s offered\n", res.Goodput, res.Offered)
	// Output:
	// planned 50, sent 50, skipped 0, 2xx 50
	// goodput 100/s of 100/s offered
}
