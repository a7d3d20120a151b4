package netlimit_test

import (
	"bufio"
	"fmt"
	"net"
	"strings"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/netlimit"
)

// A server that serves one connection at once, with no queue: a second
// client is answered 429 while the first is being served.
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
	// HTTP/1.1 429 Too Many Requests
	// open: 1 rejected: 1
}
