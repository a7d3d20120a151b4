// Command hello is the trivial loopback server of the load generator's
// benchmark (scripts/bench-load.sh): it answers every request with 200 and
// a short body, and counts them; GET /count returns the count, so that the
// server's own figure stands beside each tool's.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"sync/atomic"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18080", "listen address")
	flag.Parse()
	var n atomic.Int64
	body := []byte("hello\n")
	mux := http.NewServeMux()
	mux.HandleFunc("/count", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, n.Load()) })
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		_, _ = w.Write(body)
	})
	log.Fatal(http.ListenAndServe(*addr, mux))
}
