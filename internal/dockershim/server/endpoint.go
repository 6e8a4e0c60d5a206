package server

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// unixScheme is the only endpoint scheme the shim serves on.
const unixScheme = "unix"

// ErrUnsupportedEndpoint is wrapped by ParseEndpoint errors.
var ErrUnsupportedEndpoint = errors.New("unsupported container runtime endpoint")

// ParseEndpoint turns "unix:///path" or "/path" into the socket path.
// Any other scheme, a relative path or an empty endpoint is an error naming
// --container-runtime-endpoint.
func ParseEndpoint(endpoint string) (string, error) {
	path := endpoint
	if scheme, rest, ok := strings.Cut(endpoint, "://"); ok {
		if scheme != unixScheme {
			return "", fmt.Errorf("%w: --container-runtime-endpoint %q: scheme %q is not supported, only %s:// is",
				ErrUnsupportedEndpoint, endpoint, scheme, unixScheme)
		}
		path = rest
	}
	if path == "" {
		return "", fmt.Errorf("%w: --container-runtime-endpoint %q: empty socket path", ErrUnsupportedEndpoint, endpoint)
	}
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("%w: --container-runtime-endpoint %q: socket path must be absolute (unix:///path/to/sock)",
			ErrUnsupportedEndpoint, endpoint)
	}
	return filepath.Clean(path), nil
}
