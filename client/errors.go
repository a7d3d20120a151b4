package client

import "github.com/sluicehq/sluice/internal/configerr"

// ErrInvalidConfig is wrapped by every constructor's validation error; the
// message names the field.
var ErrInvalidConfig = configerr.New("client: invalid config")
