package kuberuntime

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// stopOrder holds back the stop of a pod's sidecars while the containers
// they serve run (upstream's termination ordering): every container of the
// pod begins terminating at once (Killing event, preStop hook), but a sidecar
// is stopped only once every regular container has stopped and, sidecars
// being stopped in the reverse order of the spec, once the sidecars declared
// after it have; or when its grace period runs out. A preStop hook of a
// sidecar so still reaches the sidecars declared before it.
type stopOrder struct {
	mu sync.Mutex
	// stopped has a channel per container of the spec, closed once that
	// container stopped (or from the start when it was not running).
	stopped map[string]chan struct{}
	// waitFor lists what a sidecar waits for before it is stopped.
	waitFor map[string][]chan struct{}
}

// newStopOrder returns the order for pod, whose running containers are
// named running; nil when the pod has no sidecar (no container waits).
func newStopOrder(pod *v1.Pod, running []string) *stopOrder {
	if pod == nil || !hasSidecar(pod) {
		return nil
	}
	isRunning := make(map[string]bool, len(running))
	for _, n := range running {
		isRunning[n] = true
	}
	o := &stopOrder{stopped: map[string]chan struct{}{}, waitFor: map[string][]chan struct{}{}}
	channel := func(name string) chan struct{} {
		ch := make(chan struct{})
		if !isRunning[name] {
			close(ch)
		}
		o.stopped[name] = ch
		return ch
	}
	regular := make([]chan struct{}, 0, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		regular = append(regular, channel(c.Name))
	}
	var later chan struct{} // the sidecar declared next, stopped before
	for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
		c := &pod.Spec.InitContainers[i]
		ch := channel(c.Name)
		if !kubecontainer.IsSidecar(c) {
			continue
		}
		deps := append([]chan struct{}{}, regular...)
		if later != nil {
			deps = append(deps, later)
		}
		o.waitFor[c.Name] = deps
		later = ch
	}
	return o
}

func hasSidecar(pod *v1.Pod) bool {
	for i := range pod.Spec.InitContainers {
		if kubecontainer.IsSidecar(&pod.Spec.InitContainers[i]) {
			return true
		}
	}
	return false
}

// wait blocks until name may be stopped or budget has passed, and returns
// how long it waited. A zero budget does not wait.
func (o *stopOrder) wait(name string, budget time.Duration) time.Duration {
	if o == nil || budget <= 0 {
		return 0
	}
	start := time.Now()
	timer := time.NewTimer(budget)
	defer timer.Stop()
	for _, ch := range o.waitFor[name] {
		select {
		case <-ch:
		case <-timer.C:
			return time.Since(start)
		}
	}
	return time.Since(start)
}

// done records that name has stopped.
func (o *stopOrder) done(name string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if ch, ok := o.stopped[name]; ok {
		close(ch)
		delete(o.stopped, name)
	}
}
