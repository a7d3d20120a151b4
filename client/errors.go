package client

import "errors"

// ErrInvalidConfig is wrapped by every constructor's validation error; the
// message names the field.
var ErrInvalidConfig = errors.New("client: invalid config")
