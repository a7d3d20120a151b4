package proxy

import (
	"fmt"
	"io"
	"log/slog"
)

// NewLogger returns the proxy's logger as cfg says: text or JSON lines on
// w, from cfg.Level up.
func NewLogger(w io.Writer, cfg LogConfig) *slog.Logger {
	lvl, err := parseLevel(cfg.Level)
	if err != nil {
		lvl = slog.LevelInfo // validate refused it already
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func parseLevel(s string) (slog.Level, error) {
	switch s {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("%q: want debug, info, warn or error", s)
}
