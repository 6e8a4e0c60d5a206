package memorymanager

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
)

// reservedByNode is reservedMemory in bytes, by NUMA node and resource.
type reservedByNode map[int]map[v1.ResourceName]uint64

// systemReserved checks reservedMemory against the machine and the node
// allocatable reservation and converts it, with upstream's messages: every
// NUMA node named must exist, and for memory and each huge page size the
// sum over the nodes must equal that resource's reservation (a resource
// reserved on one side only is a mismatch with zero).
func systemReserved(nodes []NUMANode, reservation v1.ResourceList, reserved []kubeletv1beta1.MemoryReservation) (reservedByNode, error) {
	exists := map[int]bool{}
	out := reservedByNode{}
	for _, n := range nodes {
		exists[n.ID] = true
		out[n.ID] = map[v1.ResourceName]uint64{}
	}
	totals := map[v1.ResourceName]resource.Quantity{}
	for _, r := range reserved {
		if !exists[int(r.NumaNode)] {
			return nil, fmt.Errorf("the reserved memory configuration references a NUMA node %d that does not exist on this machine", r.NumaNode)
		}
		for name, q := range r.Limits {
			sum := q.DeepCopy()
			if prev, ok := totals[name]; ok {
				sum.Add(prev)
			}
			totals[name] = sum
		}
	}
	names := map[v1.ResourceName]bool{}
	for name := range totals {
		names[name] = true
	}
	for name := range reservation {
		if name == v1.ResourceMemory || resources.IsHugePages(name) {
			names[name] = true
		}
	}
	for name := range names {
		want := resource.NewQuantity(0, resource.DecimalSI)
		if q, ok := reservation[name]; ok {
			want.Add(q)
		}
		got := resource.NewQuantity(0, resource.DecimalSI)
		if q, ok := totals[name]; ok {
			got.Add(q)
		}
		if !want.Equal(*got) {
			return nil, fmt.Errorf("the total amount %q of type %q is not equal to the value %q determined by Node Allocatable feature", got.String(), name, want.String())
		}
	}
	for _, r := range reserved {
		for name, q := range r.Limits {
			v, ok := q.AsInt64()
			if !ok {
				return nil, fmt.Errorf("could not covert a variable of type Quantity to int64")
			}
			out[int(r.NumaNode)][name] = uint64(v)
		}
	}
	return out, nil
}
