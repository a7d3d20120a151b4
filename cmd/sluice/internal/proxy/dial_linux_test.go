package proxy

import (
	"net"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// fullBacklog is a loopback address whose listener never accepts and
// whose accept queue is full: Linux drops the SYNs of any further
// connection, so connecting to it hangs, as to an upstream whose SYNs a
// firewall drops.
func fullBacklog(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil { // a queue of one
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	for range 16 {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return addr // full: this one hung
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("connecting to a listener whose accept queue is full does not hang here")
	return ""
}

// routes[].timeout bounds the dial too: an upstream that does not answer
// SYNs gets 504 at the route's timeout, not at the dialer's 5 s.
func TestDialBoundedByRouteTimeout(t *testing.T) {
	p := start(t, `
routes:
  - {name: api, upstream: UPSTREAM, timeout: 300ms}
`, "http://"+fullBacklog(t))
	begin := time.Now()
	resp, _ := get(t, client(t), newReq(t, "GET", p.url+"/"))
	took := time.Since(begin)
	if resp.StatusCode != http.StatusGatewayTimeout || took > 3*time.Second {
		t.Errorf("status %d after %v, want 504 within 3 s of a 300ms timeout", resp.StatusCode, took.Round(time.Millisecond))
	}
}
