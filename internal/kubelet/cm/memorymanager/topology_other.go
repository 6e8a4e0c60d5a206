//go:build !linux

package memorymanager

import "errors"

// ReadNUMANodes is unsupported outside Linux.
func ReadNUMANodes(string) ([]NUMANode, error) {
	return nil, errors.New("memorymanager: NUMA nodes are read from Linux sysfs only")
}
