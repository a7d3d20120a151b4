package redisstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

// A URL that Open refuses never shows its password in the error, neither in
// ConfigError.Value nor in the message: errors end up in logs. A URL that
// parses is shown redacted, so the user still sees which one is wrong.
func TestOpenRedactsURL(t *testing.T) {
	const pw = "s3cr3t"
	for _, tc := range []struct{ url, shown string }{
		{"redis://u:" + pw + "@127.0.0.1:1/0?bogus=1", "redis://u:xxxxx@127.0.0.1:1/0?bogus=1"},
		{"redis://:" + pw + "@127.0.0.1:1/x/y", "redis://:xxxxx@127.0.0.1:1/x/y"},
		{"redis://" + pw + "@127.0.0.1:1/x/y", "redis://xxxxx@127.0.0.1:1/x/y"},
		{"redis://127.0.0.1:1/0?password=" + pw + "&bogus=1", "redis://127.0.0.1:1/0?bogus=1&password=xxxxx"},
		{"redis+cluster://u:" + pw + "@127.0.0.1:1?bogus=1", "redis+cluster://u:xxxxx@127.0.0.1:1?bogus=1"},
		{"http://u:" + pw + "@127.0.0.1:1", "http://u:xxxxx@127.0.0.1:1"},
		{"redis://u:" + pw + "%zz@127.0.0.1:1", "redis://(not shown)"},
		{"rediss+cluster://u:" + pw + "%zz@127.0.0.1:1", "rediss+cluster://(not shown)"},
		{"redis://u:" + pw + "\x01@127.0.0.1:1", "redis://(not shown)"},
		{"redis://u:12/" + pw + "@127.0.0.1:1", "redis://(not shown)"}, // unescaped /: the password would be the path
		{"redis://u:1?" + pw + "@127.0.0.1:1", "redis://(not shown)"},
		{"u:" + pw + "@127.0.0.1:1", "(not shown)"},
	} {
		s, err := Open(tc.url, Config{})
		if err == nil {
			s.Close()
			t.Errorf("%q: opened", tc.url)
			continue
		}
		var ce *sluice.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, sluice.ErrInvalidConfig) || ce.Field != "url" {
			t.Errorf("%q: %v, want a ConfigError on url", tc.url, err)
			continue
		}
		if v := fmt.Sprint(ce.Value); strings.Contains(v, pw) || strings.Contains(err.Error(), pw) {
			t.Errorf("%q: the password shows: value %q, error %q", tc.url, v, err)
		}
		if ce.Value != tc.shown {
			t.Errorf("%q: value %q, want %q", tc.url, ce.Value, tc.shown)
		}
	}
}
