package volumes

import v1 "k8s.io/api/core/v1"

// fixedAllocatable is a node whose allocatable never changes.
type fixedAllocatable v1.ResourceList

func (a fixedAllocatable) Allocatable() v1.ResourceList { return v1.ResourceList(a) }
