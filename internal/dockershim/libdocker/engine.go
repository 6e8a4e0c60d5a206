package libdocker

import "github.com/docker/docker/api/types/versions"

// boundedCapsAPIVersion is the API version of Docker Engine 23.0, the first
// whose daemon knows which capabilities it has itself (moby oci/caps).
const boundedCapsAPIVersion = "1.42"

// DaemonBoundsCapabilities reports whether a daemon whose own API version
// (Version's APIVersion, not the negotiated one) is apiVersion gives a
// privileged container, and a CapAdd of ALL, only the capabilities it has
// itself, and refuses a CapAdd or CapDrop that names one it lacks (Engine 23
// and later). Older daemons (20.10: API 1.41) grant their whole static list,
// which runc then fails to set on a host whose bounding set lacks one.
func DaemonBoundsCapabilities(apiVersion string) bool {
	return apiVersion != "" && versions.GreaterThanOrEqualTo(apiVersion, boundedCapsAPIVersion)
}
