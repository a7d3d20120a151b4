// Package redistest starts real redis-server processes on free loopback
// ports for tests and benchmarks, as net/http/httptest starts servers: a
// single node (Start), a three-master Redis Cluster (StartCluster) or one
// node that serves all of a Cluster's slots (StartClusterNode). It
// never touches port 6379 and never persists anything (--save "",
// --appendonly no); Close kills the processes and removes their files.
//
// redis-server (and redis-cli for a cluster) must be on PATH: a missing
// binary is an error, so a test that needs Redis fails instead of skipping.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Server is one redis-server process on 127.0.0.1.
type Server struct {
	Port int
	dir  string
	args []string
	cmd  *exec.Cmd
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr() }

// Start starts a redis-server on a free loopback port with the extra
// arguments given (redis-server command-line options, "--maxmemory", "1mb")
// and waits until it answers PING.
func Start(extra ...string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return startOn(port, extra)
}

func startOn(port int, extra []string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redistest: redis-server not found (install redis-server): %w", err)
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--protected-mode", "yes", "--loglevel", "warning",
	}, extra...)
	s := &Server{Port: port, dir: dir, args: args}
	if err := s.launch(bin); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) launch(bin string) error {
	cmd := exec.Command(bin, s.args...)
	cmd.Dir = s.dir
	// Its own process group, so that a Ctrl-C of the test does not reach it
	// before Close, and Close kills exactly it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: start redis-server: %w", err)
	}
	s.cmd = cmd
	if err := waitPing(s.Addr(), 10*time.Second); err != nil {
		s.Kill()
		return err
	}
	return nil
}

// Kill kills the server (SIGKILL) and waits for it to exit. Its port stays
// reserved for Restart.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // a stopped process dies on SIGKILL too, but be plain
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Pause stops the server with SIGSTOP: it keeps its sockets (the kernel
// still accepts connections) but answers nothing until Resume. It returns
// once the process is stopped (on Linux, by /proc): the signal alone is
// delivered asynchronously, and on a loaded machine the server may
// still answer for a while after it.
func (s *Server) Pause() error {
	if err := s.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	stat := "/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/stat"
	for deadline := time.Now().Add(5 * time.Second); ; {
		b, err := os.ReadFile(stat)
		if err != nil {
			return nil // no /proc: the signal is all we have
		}
		// pid (comm) state ...: comm may hold spaces, the state follows the last ')'.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: redis-server %d not stopped 5s after SIGSTOP", s.cmd.Process.Pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	if s.cmd == nil {
		return errors.New("redistest: server not running")
	}
	return s.cmd.Process.Signal(sig)
}

// Restart starts a killed server again on the same port, empty.
func (s *Server) Restart() error {
	s.Kill()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return err
	}
	return s.launch(bin)
}

// Close kills the server and removes its directory.
func (s *Server) Close() {
	s.Kill()
	os.RemoveAll(s.dir)
}

// Cluster is a Redis Cluster of masters without replicas, on loopback.
type Cluster struct {
	Nodes []*Server
}

// Addrs are the nodes' host:port addresses (the seed list of a cluster
// client).
func (c *Cluster) Addrs() []string {
	a := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		a[i] = n.Addr()
	}
	return a
}

// URL is a redis+cluster:// URL naming every node.
func (c *Cluster) URL() string {
	a := c.Addrs()
	u := "redis+cluster://" + a[0]
	for i, x := range a[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + x
	}
	return u
}

// StartCluster starts n (at least 3) cluster-enabled redis-servers, joins
// them with redis-cli --cluster create (n masters, no replicas) and waits
// until every node reports cluster_state:ok.
func StartCluster(n int) (*Cluster, error) {
	if n < 3 {
		return nil, fmt.Errorf("redistest: a cluster needs at least 3 masters, not %d", n)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redistest: redis-cli not found (install redis-tools): %w", err)
	}
	c := &Cluster{}
	for range n {
		port, err := freeClusterPort()
		if err != nil {
			c.Close()
			return nil, err
		}
		s, err := startOn(port, []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"})
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redistest: redis-cli --cluster create: %v: %s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, s := range c.Nodes {
		for {
			info, err := command(s.Addr(), "CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				return nil, fmt.Errorf("redistest: cluster not ok after 20s: %q %v", info, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c, nil
}

// StartClusterNode starts one cluster-enabled redis-server that serves
// every slot itself (CLUSTER ADDSLOTSRANGE 0 16383), and waits until it
// reports cluster_state:ok. Reached through a plain redis:// URL it is a
// single server that still refuses a command whose keys span slots
// (CROSSSLOT), as a Cluster node or a cluster proxy does.
func StartClusterNode() (*Server, error) {
	port, err := freeClusterPort()
	if err != nil {
		return nil, err
	}
	s, err := startOn(port, []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"})
	if err != nil {
		return nil, err
	}
	if _, err := command(s.Addr(), "CLUSTER", "ADDSLOTSRANGE", "0", "16383"); err != nil {
		s.Close()
		return nil, fmt.Errorf("redistest: CLUSTER ADDSLOTSRANGE: %w", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := command(s.Addr(), "CLUSTER", "INFO")
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Close()
			return nil, fmt.Errorf("redistest: cluster node not ok after 20s: %q %v", info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Close stops every node.
func (c *Cluster) Close() {
	for _, s := range c.Nodes {
		s.Close()
	}
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before redis-server binds it; Start then fails, loudly.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// freeClusterPort finds a free port p whose cluster bus port p+10000 is
// free too.
func freeClusterPort() (int, error) {
	for range 50 {
		p, err := freePort()
		if err != nil {
			return 0, err
		}
		if p+10000 > 65535 || p == 6379 {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		if err != nil {
			continue
		}
		l.Close()
		return p, nil
	}
	return 0, errors.New("redistest: no free port pair for a cluster node")
}

func waitPing(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		out, err := command(addr, "PING")
		if err == nil && out == "PONG" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: %s does not answer PING: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// command sends one command in RESP and returns a simple or bulk string
// reply; enough for PING and CLUSTER INFO without a client library.
func command(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "+"):
		return line[1:], nil
	case strings.HasPrefix(line, "-"):
		return "", errors.New(line[1:])
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 || n > 1<<20 {
			return "", fmt.Errorf("redistest: bad bulk length %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("redistest: unexpected reply %q", line)
}
