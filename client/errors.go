package client

import "github.com/sluicehq/sluice"

// invalid is the error for a bad field or argument: a *sluice.ConfigError,
// which matches sluice.ErrInvalidConfig.
func invalid(field string, v any, allowed string) error {
	return sluice.NewConfigError("client", field, v, allowed)
}
