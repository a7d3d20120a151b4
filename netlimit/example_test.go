package netlimit_test

import (
	"bufio"
	"fmt"
	"net"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/netlimit"
	"github.com/sluicehq/sluice/rate"
)

// A server that serves one connection at once, with no queue: a second
// client is answered 503 (the server is full) while the first is being
// served.
func ExampleNewListener() {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	lim, err := concurrency.New(concurrency.Config{Limit: 1})
	if err != nil {
		panic(err)
	}
	ln, err := netlimit.NewListener(inner, netlimit.Config{Limiter: lim})
	if err != nil {
		panic(err)
	}
	defer ln.Close()

	first, _ := net.Dial("tcp", ln.Addr().String())
	defer first.Close()
	served, _ := ln.Accept() // holds the only slot until closed
	defer served.Close()

	second, _ := net.Dial("tcp", ln.Addr().String())
	defer second.Close()
	fmt.Fprint(second, "GET / HTTP/1.1\r\nHost: example\r\n\r\n")
	status, _ := bufio.NewReader(second).ReadString('\n')
	fmt.Println(strings.TrimSpace(status))
	fmt.Println("open:", ln.Stats().InFlight, "rejected:", ln.Stats().RejectedTotal())
	// Output:
	// HTTP/1.1 503 Service Unavailable
	// open: 1 rejected: 1
}

// An accept-rate token bucket that rejects the excess instead of leaving it
// in the kernel's backlog. A bucket with Rate 0 and Burst 1 holds one token,
// so the second connection is answered 429.
func ExampleConfig_rejectOverRate() {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	bucket, err := rate.NewBucket(rate.Config{Rate: 0, Burst: 1})
	if err != nil {
		panic(err)
	}
	ln, err := netlimit.NewListener(inner, netlimit.Config{AcceptRate: bucket, RejectOverRate: true})
	if err != nil {
		panic(err)
	}
	defer ln.Close()

	first, _ := net.Dial("tcp", ln.Addr().String())
	defer first.Close()
	served, _ := ln.Accept()
	defer served.Close()

	second, _ := net.Dial("tcp", ln.Addr().String())
	defer second.Close()
	fmt.Fprint(second, "GET / HTTP/1.1\r\nHost: example\r\n\r\n")
	status, _ := bufio.NewReader(second).ReadString('\n')
	fmt.Println(strings.TrimSpace(status))
	fmt.Println("rejected for rate:", ln.Stats().Rejected[sluice.ReasonRate])
	// Output:
	// HTTP/1.1 429 Too Many Requests
	// rejected for rate: 1
}
