package resources

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// DefaultMaxPods is the pods capacity when Options.MaxPods is 0 (upstream's maxPods).
const DefaultMaxPods = 110

// Options configures a Node.
type Options struct {
	// Machine is the machine, read once (ReadMachine).
	Machine Machine
	// MaxPods is the pods capacity; 0 = 110.
	MaxPods int
	// SystemReserved and KubeReserved are held back from allocatable.
	SystemReserved, KubeReserved v1.ResourceList
	// EvictionHard maps eviction signals to hard thresholds, e.g.
	// {"memory.available":"100Mi","nodefs.available":"10%"}; memory.available
	// and nodefs.available are held back from allocatable (memory,
	// ephemeral-storage). nil = none.
	EvictionHard map[string]string
}

// Node is the node's capacity and allocatable, safe for concurrent use.
// Capacity is the machine's (cpu, memory, pods, ephemeral-storage, huge
// pages) plus the extended resources set at run time; allocatable is capacity
// minus systemReserved, kubeReserved and the hard eviction thresholds, and
// memory minus the huge pages, never below zero (upstream's node allocatable).
type Node struct {
	machine    Machine
	maxPods    int
	reserved   [2]v1.ResourceList // systemReserved, kubeReserved
	thresholds []Threshold

	mu  sync.Mutex // serialises updates of cur
	cur atomic.Pointer[lists]
	// devices are the device plugins' resources (SetDeviceResources): their
	// capacity, and their allocatable before reservations.
	devCapacity, devAllocatable v1.ResourceList
}

// lists is one immutable state of the node's resources.
type lists struct {
	capacity, allocatable v1.ResourceList
	devAllocatable        v1.ResourceList // the device plugins' healthy devices
}

// New validates opts and computes the node's capacity and allocatable.
func New(opts Options) (*Node, error) {
	if opts.MaxPods <= 0 {
		opts.MaxPods = DefaultMaxPods
	}
	thresholds, err := ParseThresholds(opts.EvictionHard)
	if err != nil {
		return nil, fmt.Errorf("evictionHard: %w", err)
	}
	n := &Node{machine: opts.Machine, maxPods: opts.MaxPods, thresholds: thresholds,
		reserved: [2]v1.ResourceList{opts.SystemReserved.DeepCopy(), opts.KubeReserved.DeepCopy()}}
	capacity := opts.Machine.capacity(opts.MaxPods)
	if err := n.validate(capacity); err != nil {
		return nil, err
	}
	n.set(capacity)
	return n, nil
}

// validate refuses reservations larger than the capacity, with upstream's
// message (the kubelet does not start).
func (n *Node) validate(capacity v1.ResourceList) error {
	reserved := n.reservation(capacity)
	names := make([]string, 0, len(reserved))
	for name := range reserved {
		names = append(names, string(name))
	}
	slices.Sort(names)
	var problems []string
	for _, name := range names {
		r, c := reserved[v1.ResourceName(name)], capacity[v1.ResourceName(name)]
		left := c.DeepCopy()
		left.Sub(r)
		if left.Sign() < 0 {
			problems = append(problems, fmt.Sprintf("Resource %q has a reservation of %v but capacity of %v. Expected capacity >= reservation.", name, &r, &c))
		}
	}
	if problems != nil {
		return fmt.Errorf("invalid Node Allocatable configuration. %s", strings.Join(problems, " "))
	}
	return nil
}

// Machine returns the machine the node was built from.
func (n *Node) Machine() Machine { return n.machine }

// HardEvictionThresholds returns the parsed evictionHard thresholds, sorted
// by signal. The slice must not be modified.
func (n *Node) HardEvictionThresholds() []Threshold { return n.thresholds }

// Reservation is the node allocatable reservation of the current capacity:
// systemReserved + kubeReserved + the hard eviction thresholds, by resource
// (upstream's GetNodeAllocatableReservation).
func (n *Node) Reservation() v1.ResourceList { return n.reservation(n.cur.Load().capacity) }

// Capacity returns a copy of the node's current capacity.
func (n *Node) Capacity() v1.ResourceList { return n.cur.Load().capacity.DeepCopy() }

// Allocatable returns a copy of the node's current allocatable.
func (n *Node) Allocatable() v1.ResourceList { return n.cur.Load().allocatable.DeepCopy() }

// AllocatableOf computes the allocatable of any capacity list (the node
// object's, which may carry extended resources others advertise) with this
// node's reservations.
func (n *Node) AllocatableOf(capacity v1.ResourceList) v1.ResourceList {
	var dev v1.ResourceList
	if cur := n.cur.Load(); cur != nil {
		dev = cur.devAllocatable
	}
	return n.allocatableOf(capacity, dev)
}

// allocatableOf is capacity less the reservations, where a device
// resource's allocatable is its healthy devices (dev) less any reservation
// (upstream's setter), never below zero.
func (n *Node) allocatableOf(capacity, dev v1.ResourceList) v1.ResourceList {
	reserved := n.reservation(capacity)
	out := make(v1.ResourceList, len(capacity))
	for name, c := range capacity {
		v := c.DeepCopy()
		if d, ok := dev[name]; ok {
			v = d.DeepCopy()
		}
		if r, ok := reserved[name]; ok {
			v.Sub(r)
		}
		if v.Sign() < 0 {
			v.Set(0)
		}
		out[name] = v
	}
	for name, pages := range capacity {
		if !IsHugePages(name) {
			continue
		}
		mem := out[v1.ResourceMemory]
		mem.Sub(pages)
		if mem.Sign() < 0 {
			mem.Set(0)
		}
		out[v1.ResourceMemory] = mem
	}
	return out
}

// SetExtendedCapacity replaces the node's extended resources (those neither
// the machine's nor huge pages, e.g. a device plugin's) with extended; the
// allocatable follows. Names that are not extended resources are refused.
func (n *Node) SetExtendedCapacity(extended v1.ResourceList) error {
	machine := n.machine.capacity(n.maxPods)
	for name := range extended {
		if !IsExtendedResource(name) {
			return fmt.Errorf("%s is not an extended resource", name)
		}
	}
	for name, q := range extended {
		machine[name] = q.DeepCopy()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.set(machine)
	return nil
}

// set stores capacity with the device resources, and its allocatable;
// caller holds mu or owns n.
func (n *Node) set(capacity v1.ResourceList) {
	for name, q := range n.devCapacity {
		capacity[name] = q.DeepCopy()
	}
	n.cur.Store(&lists{capacity: capacity, allocatable: n.allocatableOf(capacity, n.devAllocatable), devAllocatable: n.devAllocatable})
}

// SetDeviceResources replaces the device plugins' resources: capacity counts
// every device, allocatable the healthy ones. Names that are not extended
// resources are refused.
func (n *Node) SetDeviceResources(capacity, allocatable v1.ResourceList) error {
	for _, l := range []v1.ResourceList{capacity, allocatable} {
		for name := range l {
			if !IsExtendedResource(name) {
				return fmt.Errorf("%s is not an extended resource", name)
			}
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.devCapacity, n.devAllocatable = capacity.DeepCopy(), allocatable.DeepCopy()
	current := n.cur.Load().capacity.DeepCopy()
	n.set(current)
	return nil
}

// reservation sums systemReserved, kubeReserved and the hard eviction
// reservation for every resource in capacity (upstream's
// GetNodeAllocatableReservation).
func (n *Node) reservation(capacity v1.ResourceList) v1.ResourceList {
	eviction := hardEvictionReservation(n.thresholds, capacity)
	out := v1.ResourceList{}
	for name := range capacity {
		sum := resource.NewQuantity(0, resource.DecimalSI)
		for _, l := range []v1.ResourceList{n.reserved[0], n.reserved[1], eviction} {
			if q, ok := l[name]; ok {
				sum.Add(q)
			}
		}
		if !sum.IsZero() {
			out[name] = *sum
		}
	}
	return out
}

// IsHugePages reports whether name is a hugepages-<size> resource.
func IsHugePages(name v1.ResourceName) bool {
	return strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

// IsExtendedResource reports whether name is an extended resource: a
// domain-prefixed name outside kubernetes.io that is not a quota "requests."
// name.
func IsExtendedResource(name v1.ResourceName) bool {
	s := string(name)
	return strings.Contains(s, "/") && !strings.Contains(s, v1.ResourceDefaultNamespacePrefix) &&
		!strings.HasPrefix(s, v1.DefaultResourceRequestsPrefix)
}
