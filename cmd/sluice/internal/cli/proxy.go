package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluicehq/sluice/cmd/sluice/internal/proxy"
	"github.com/sluicehq/sluice/cmd/sluice/internal/yamlfile"
)

// runProxy is `sluice proxy`: it serves until SIGTERM or SIGINT, reloads
// its config on SIGHUP (and when the file changes), and drains on the way
// out. With -check it only validates the config.
func runProxy(e env, fs *flag.FlagSet, args []string) int {
	path := fs.String("config", "sluice.yaml", "the config `FILE` (see docs/proxy.md)")
	check := fs.Bool("check", false, "validate the config and exit: 0 valid, 2 not")
	if _, code, ok := parse(fs, args, 0); !ok {
		return code
	}
	cfg, err := proxy.LoadConfig(*path)
	if err == nil {
		err = proxy.Check(cfg)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice proxy: %v\n", err)
		if errors.Is(err, yamlfile.ErrInvalid) || errors.Is(err, os.ErrNotExist) {
			return ExitUsage
		}
		return ExitFail
	}
	if *check {
		fmt.Fprintf(e.stdout, "%s: ok (%s, %s)\n", *path, counted(len(cfg.Routes), "route", "routes"), counted(len(cfg.Policies), "policy", "policies"))
		return ExitOK
	}
	log := proxy.NewLogger(e.stderr, cfg.Log)
	s, err := proxy.New(*path, log)
	if err != nil { // the file changed since LoadConfig
		fmt.Fprintf(e.stderr, "sluice proxy: %v\n", err)
		return ExitUsage
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice proxy: listen: %v\n", err)
		return ExitFail
	}
	adminLn, err := net.Listen("tcp", cfg.Admin.Listen)
	if err != nil {
		ln.Close()
		fmt.Fprintf(e.stderr, "sluice proxy: admin.listen: %v\n", err)
		return ExitFail
	}
	proxy.LogStart(log, *path, ln.Addr(), adminLn.Addr())

	ctx, stop := signalContext()
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go s.Watch(watchCtx)
	go func() {
		for {
			select {
			case <-hup:
				_ = s.Reload() // logged, and shown on the admin API
			case <-watchCtx.Done():
				return
			}
		}
	}()
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln, adminLn) }()
	select {
	case err := <-served:
		fmt.Fprintf(e.stderr, "sluice proxy: %v\n", err)
		// Close the stores and policies, and refuse the reloads a SIGHUP
		// or the file watch may still start.
		_ = s.Shutdown(context.Background())
		return ExitFail
	case <-ctx.Done():
	}
	// The serving config's: a reload may have changed it since cfg, and
	// Shutdown drains with the serving one.
	log.Info("shutting down: draining requests in flight", "drain_timeout", s.Config().DrainTimeout)
	code := ExitOK
	if err := s.Shutdown(context.Background()); err != nil {
		log.Error("drain cut short", "err", err)
		code = ExitFail
	}
	<-served
	log.Info("stopped")
	return code
}

// counted is "1 route" or "n routes".
func counted(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
