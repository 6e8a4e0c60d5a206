//go:build !linux

package cpumanager

import "errors"

// DiscoverTopology is only implemented on Linux; elsewhere pass
// Options.Topology.
func DiscoverTopology(sysfsRoot string) (*Topology, error) {
	return nil, errors.New("cpu topology discovery needs Linux sysfs")
}
