package volumes

import (
	v1 "k8s.io/api/core/v1"
)

// allocatable is the node's current allocatable (empty without one).
func (m *Manager) allocatable() v1.ResourceList {
	if m.node == nil {
		return nil
	}
	return m.node.Allocatable()
}

// allocatableMemory is the allocatable memory in bytes, 0 when unknown.
func (m *Manager) allocatableMemory() int64 {
	q, ok := m.allocatable()[v1.ResourceMemory]
	if !ok {
		m.logger.Warn("Node memory unknown; memory-backed volumes use the kernel's default size")
		return 0
	}
	return q.Value()
}
