// Command benchrig is the rest of the proxy benchmark's rig (run.sh): a
// trivial upstream, and a bare httputil.ReverseProxy to compare `sluice
// proxy` with. The bare proxy's transport has the settings the sluice
// proxy's has, so that the comparison is of what sluice adds.
//
//	benchrig upstream -addr 127.0.0.1:18001
//	benchrig rp -addr 127.0.0.1:18002 -upstream http://127.0.0.1:18001
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchrig upstream|rp [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address (loopback)")
	up := fs.String("upstream", "", "rp: upstream URL")
	_ = fs.Parse(os.Args[2:])
	var h http.Handler
	switch os.Args[1] {
	case "upstream":
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	case "rp":
		u, err := url.Parse(*up)
		if err != nil || u.Host == "" {
			fmt.Fprintf(os.Stderr, "benchrig rp: -upstream %q: want a URL\n", *up)
			os.Exit(2)
		}
		h = &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.Out.Host = pr.In.Host; pr.SetXForwarded() },
			Transport: &http.Transport{
				DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
				ForceAttemptHTTP2:   true,
				MaxIdleConns:        1024,
				MaxIdleConnsPerHost: 1024,
				IdleConnTimeout:     90 * time.Second,
				// sluice proxy's default route timeout
				ResponseHeaderTimeout: 30 * time.Second,
				ExpectContinueTimeout: time.Second,
			},
			ErrorLog: log.New(io.Discard, "", 0),
		}
	default:
		fmt.Fprintf(os.Stderr, "benchrig: unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
	// As sluice proxy's server: a header timeout, and proxy errors (wrk
	// closing its connections at the end of a run) not logged.
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 30 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
