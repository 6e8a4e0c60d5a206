package kubelet

import (
	"errors"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
)

// PodAllocator is an admit handler that allocates to the pods it admits
// (CPUs, memory and devices). When admission
// rejects the pod, by this handler or a later one, Release gives back what
// Admit allocated to it, but only if the pod held nothing of the allocator's
// before (Holds): a pod that finds its CPUs or devices again after a kubelet
// restart keeps them while its containers may still run, until the allocator
// frees the allocations of pods no longer active, as upstream does.
type PodAllocator interface {
	PodAdmitter
	Holds(pod *v1.Pod) bool
	Release(pod *v1.Pod) error
}

// admitHandler is one step of admission.
type admitHandler struct {
	name string // in logs
	PodAdmitter
}

// admitChain is the ordered list of admit handlers a new pod passes
// (upstream's PodAdmitHandler chain). The first refusal rejects the pod with
// that handler's reason and message, and every allocator that ran, the
// refusing one included, releases what it gave the pod (see PodAllocator),
// last first.
type admitChain struct {
	handlers []admitHandler
	logger   *zap.Logger
}

// newAdmitChain builds the chain in the order upstream's kubelet adds its
// handlers: node pressure (eviction), the sysctls allowlist, resource
// allocation (the topology manager's), the predicates (node resources, max pods, node selector, OS, ...),
// the node's declared features, then the node shutdown. Nil handlers are left
// out (resource allocation is always there: without a static CPU or memory
// policy or device plugins it allocates nothing).
func newAdmitChain(d deps, predicates PodAdmitter, logger *zap.Logger) *admitChain {
	c := &admitChain{logger: logger}
	add := func(name string, a PodAdmitter) {
		if a != nil {
			c.handlers = append(c.handlers, admitHandler{name: name, PodAdmitter: a})
		}
	}
	add("eviction", d.pressure)
	add("sysctl", d.sysctls)
	add("resourceAllocation", resourceAllocator{cpus: d.cpus, memory: d.memory, devices: d.devices, topology: d.topology})
	add("predicates", predicates)
	add("nodeDeclaredFeatures", d.features)
	add("nodeShutdown", d.shutdown)
	return c
}

// NodeAdmitters are the admit handlers of the managers that act on pods
// through the kubelet (they kill pods with KillPodNow), which are therefore
// built after it: they join its admission with SetNodeAdmitters, the node
// pressure first and the node shutdown last, as upstream's handler order.
type NodeAdmitters struct {
	// Pressure refuses pods the node cannot take under resource pressure
	// (eviction.Manager). Nil admits regardless of pressure.
	Pressure PressureAdmitter
	// Shutdown refuses pods while the node shuts down (nodeshutdown.Manager).
	// Nil: none.
	Shutdown PodAdmitter
}

// SetNodeAdmitters puts a's handlers into the admission chain (replacing
// those set before). Call it before Run.
func (k *Kubelet) SetNodeAdmitters(a NodeAdmitters) {
	k.deps.pressure, k.deps.shutdown = a.Pressure, a.Shutdown
	k.admission = newAdmitChain(k.deps, admitFunc(k.canAdmit), k.logger)
}

// admit runs the handlers in order; see admitChain.
func (c *admitChain) admit(p *v1.Pod) (reason, message string, ok bool) {
	held := make([]bool, len(c.handlers))
	for i, h := range c.handlers {
		if a, isAllocator := h.PodAdmitter.(PodAllocator); isAllocator {
			held[i] = a.Holds(p)
		}
		if reason, message, ok = h.Admit(p); ok {
			continue
		}
		c.logger.Debug("Admit handler refused the pod", zap.String("handler", h.name), zap.String("pod", podRef(p)), zap.String("reason", reason))
		c.release(p, c.handlers[:i+1], held)
		return reason, message, false
	}
	return "", "", true
}

// release calls Release of every allocator among handlers that the pod held
// nothing of before admission, last first.
func (c *admitChain) release(p *v1.Pod, handlers []admitHandler, held []bool) {
	for i := len(handlers) - 1; i >= 0; i-- {
		a, ok := handlers[i].PodAdmitter.(PodAllocator)
		if !ok || held[i] {
			continue
		}
		if err := a.Release(p); err != nil {
			c.logger.Error("Release what admission allocated to a rejected pod", zap.String("handler", handlers[i].name),
				zap.String("pod", podRef(p)), zap.Error(err))
		}
	}
}

// admitFunc adapts a function to PodAdmitter.
type admitFunc func(pod *v1.Pod) (reason, message string, ok bool)

func (f admitFunc) Admit(pod *v1.Pod) (string, string, bool) { return f(pod) }

// resourceAllocator is upstream's resource allocation admit handler: the
// topology manager allocates the pod's devices, CPUs and memory through
// their managers (its hint providers), aligned on NUMA nodes as its policy
// wants (policy none: container by container, init containers first,
// devices then CPUs then memory, unaligned). Without a topology manager
// nothing is allocated.
type resourceAllocator struct {
	cpus     CPUManager
	memory   MemoryManager
	devices  DeviceAllocator // nil: none
	topology ResourceAligner // nil: nothing allocated
}

func (a resourceAllocator) Admit(p *v1.Pod) (reason, message string, ok bool) {
	if a.topology == nil {
		return "", "", true
	}
	return a.topology.Admit(p)
}

// Holds reports whether the pod holds CPUs, memory or devices already.
func (a resourceAllocator) Holds(p *v1.Pod) bool {
	if a.devices != nil && len(a.devices.PodDevices(p.UID)) > 0 || a.memory.HoldsPod(string(p.UID)) {
		return true
	}
	for _, list := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			if _, ok := a.cpus.ExclusiveCPUs(string(p.UID), list[i].Name); ok {
				return true
			}
		}
	}
	return false
}

// Release gives back the pod's CPUs, its memory, then its devices.
func (a resourceAllocator) Release(p *v1.Pod) error {
	err := a.cpus.RemovePod(string(p.UID))
	err = errors.Join(err, a.memory.RemovePod(string(p.UID)))
	if a.devices != nil {
		err = errors.Join(err, a.devices.RemovePod(string(p.UID)))
	}
	return err
}
