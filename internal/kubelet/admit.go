package kubelet

import (
	"fmt"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
)

// PodAllocator is an admit handler that allocates to the pods it admits
// (CPUs, devices; a memory manager would be one more). Release gives back
// everything its Admit allocated to the pod, whole or in part; admission
// calls it when the pod is rejected, by this handler or a later one.
type PodAllocator interface {
	PodAdmitter
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
// refusing one included, releases what it gave the pod, last first.
type admitChain struct {
	handlers []admitHandler
	logger   *zap.Logger
}

// newAdmitChain builds the chain in the order upstream's kubelet adds its
// handlers: node pressure (eviction), then the node's declared features and
// the sysctls allowlist, then resource allocation (CPUs, then devices, each
// for the init containers first), then the predicates (node resources, max
// pods, node selector, OS, ...), then the node shutdown. Nil handlers are
// left out.
func newAdmitChain(d deps, predicates PodAdmitter, logger *zap.Logger) *admitChain {
	c := &admitChain{logger: logger}
	add := func(name string, a PodAdmitter) {
		if a != nil {
			c.handlers = append(c.handlers, admitHandler{name: name, PodAdmitter: a})
		}
	}
	add("eviction", d.pressure)
	add("nodeDeclaredFeatures", d.features)
	add("sysctl", d.sysctls)
	add("cpuManager", cpuAllocator{cpus: d.cpus})
	if d.devices != nil {
		add("deviceManager", deviceAllocator{devices: d.devices})
	}
	add("predicates", predicates)
	add("nodeShutdown", d.shutdown)
	return c
}

// admit runs the handlers in order; see admitChain.
func (c *admitChain) admit(p *v1.Pod) (reason, message string, ok bool) {
	for i, h := range c.handlers {
		if reason, message, ok = h.Admit(p); ok {
			continue
		}
		c.logger.Debug("Admit handler refused the pod", zap.String("handler", h.name), zap.String("pod", podRef(p)), zap.String("reason", reason))
		c.release(p, c.handlers[:i+1])
		return reason, message, false
	}
	return "", "", true
}

// release calls Release of every allocator among handlers, last first.
func (c *admitChain) release(p *v1.Pod, handlers []admitHandler) {
	for i := len(handlers) - 1; i >= 0; i-- {
		a, ok := handlers[i].PodAdmitter.(PodAllocator)
		if !ok {
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

// cpuAllocator gives the pod's containers their CPUs (init containers
// first), as upstream's resource allocation admit handler does; a failure is
// upstream's UnexpectedAdmissionError.
type cpuAllocator struct{ cpus CPUManager }

func (a cpuAllocator) Admit(p *v1.Pod) (reason, message string, ok bool) {
	for _, list := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			if err := a.cpus.Allocate(p, &list[i]); err != nil {
				return unexpectedAdmission(err)
			}
		}
	}
	return "", "", true
}

func (a cpuAllocator) Release(p *v1.Pod) error { return a.cpus.RemovePod(string(p.UID)) }

// deviceAllocator gives the pod's containers (init containers first) their
// device plugins' devices, as upstream's resource allocation admit handler;
// a failure is upstream's UnexpectedAdmissionError.
type deviceAllocator struct{ devices DeviceAllocator }

func (a deviceAllocator) Admit(p *v1.Pod) (reason, message string, ok bool) {
	for i := range p.Spec.InitContainers {
		if err := a.devices.Allocate(p, &p.Spec.InitContainers[i], true); err != nil {
			return unexpectedAdmission(err)
		}
	}
	for i := range p.Spec.Containers {
		if err := a.devices.Allocate(p, &p.Spec.Containers[i], false); err != nil {
			return unexpectedAdmission(err)
		}
	}
	return "", "", true
}

func (a deviceAllocator) Release(p *v1.Pod) error { return a.devices.RemovePod(string(p.UID)) }

// unexpectedAdmission is upstream's rejection of a pod whose resources
// (CPUs, devices) could not be allocated.
func unexpectedAdmission(err error) (reason, message string, ok bool) {
	return "UnexpectedAdmissionError", fmt.Sprintf("Allocate failed due to %v, which is unexpected", err), false
}
