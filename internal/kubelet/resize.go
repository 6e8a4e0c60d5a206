package kubelet

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// In-place pod resize, the kubelet's half (upstream's allocation manager and
// resize conditions). Every admitted pod has an allocation in
// allocated_pods_state: the cpu and memory the kubelet gave its containers.
// The pod workers sync the allocated pod (the spec with its resources
// replaced by the allocation), so a resize reaches the runtime only once
// accepted. A spec whose resources differ from the allocation is a resize:
// it is accepted when the pod still fits the node with the others at their
// allocations (allocation updated, PodResizeInProgress until the runtime
// manager applied it, events ResizeStarted and ResizeCompleted), else left
// pending (PodResizePending, reason Deferred and retried when pods go and
// every 3 minutes, or Infeasible until the spec changes again).

// Event reasons of a resize (upstream's).
const (
	eventResizeStarted    = "ResizeStarted"
	eventResizeCompleted  = "ResizeCompleted"
	eventResizeError      = "ResizeError"
	eventResizeDeferred   = "ResizeDeferred"
	eventResizeInfeasible = "ResizeInfeasible"
)

// Pending reasons (v1.PodReasonDeferred, v1.PodReasonInfeasible) and the
// in-progress error reason.
const (
	resizeReasonDeferred   = "Deferred"
	resizeReasonInfeasible = "Infeasible"
	resizeReasonError      = "Error"
)

// resizeRetryPeriod is how often deferred resizes are retried without a
// trigger (upstream's retryDelay).
const resizeRetryPeriod = 3 * time.Minute

// resizeConds are a pod's resize conditions.
type resizeConds struct {
	pending, inProgress *v1.PodCondition
}

// resizer keeps the allocations, the resize conditions and the pending
// resizes. Safe for concurrent use (the sync loop and the pod workers).
type resizer struct {
	allocated *kubecontainer.ResourceState
	cpuStatic bool // CPU manager policy static: Guaranteed cpu resizes are infeasible
	memStatic bool // memory manager policy Static: Guaranteed memory resizes are infeasible
	// podLevelOff: InPlacePodLevelResourcesVerticalScaling is off, resizes of
	// the pod-level resources are infeasible.
	podLevelOff bool

	mu        sync.Mutex
	conds     map[k8stypes.UID]*resizeConds
	pending   map[k8stypes.UID]bool
	lastRetry time.Time
}

func newResizer(allocated *kubecontainer.ResourceState, cpuStatic, memStatic, podLevelOff bool) *resizer {
	return &resizer{allocated: allocated, cpuStatic: cpuStatic, memStatic: memStatic, podLevelOff: podLevelOff, conds: map[k8stypes.UID]*resizeConds{},
		pending: map[k8stypes.UID]bool{}, lastRetry: time.Now()}
}

// allocatedPod is pod with its containers' resources (and pod-level ones)
// replaced by its allocation; pod itself when it has none.
func (r *resizer) allocatedPod(pod *v1.Pod) *v1.Pod {
	if r == nil {
		return pod
	}
	info, ok := r.allocated.Get(pod.UID)
	if !ok || resourceInfoEqual(info, kubecontainer.ResourceInfoForPod(pod)) {
		return pod
	}
	out := pod.DeepCopy()
	for _, list := range [][]v1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range list {
			if res, ok := info.ContainerResources[list[i].Name]; ok {
				list[i].Resources = res
			}
		}
	}
	out.Spec.Resources = info.PodLevelResources.DeepCopy() // nil when none was allocated
	return out
}

// resourceInfoEqual compares the cpu and memory of two allocations.
func resourceInfoEqual(a, b kubecontainer.PodResourceInfo) bool {
	if len(a.ContainerResources) != len(b.ContainerResources) {
		return false
	}
	for name, ra := range a.ContainerResources {
		rb, ok := b.ContainerResources[name]
		if !ok || !kubecontainer.CPUMemoryEqual(ra, rb) {
			return false
		}
	}
	return podLevelEqual(a.PodLevelResources, b.PodLevelResources)
}

// podLevelEqual compares the cpu and memory of two pod-level resources.
func podLevelEqual(a, b *v1.ResourceRequirements) bool {
	switch {
	case a == nil && b == nil:
		return true
	case a == nil || b == nil:
		return false
	}
	return kubecontainer.CPUMemoryEqual(*a, *b)
}

// allocate records pod's resources as its allocation unless it has one
// (a kubelet restart keeps the allocation, a pending resize stays pending).
func (r *resizer) allocate(pod *v1.Pod) error {
	if r == nil {
		return nil
	}
	if _, ok := r.allocated.Get(pod.UID); ok {
		return nil
	}
	return r.allocated.Set(pod.UID, kubecontainer.ResourceInfoForPod(pod))
}

// resizeRequested reports whether pod's spec differs from its allocation.
func (r *resizer) resizeRequested(pod *v1.Pod) bool {
	if r == nil {
		return false
	}
	info, ok := r.allocated.Get(pod.UID)
	return ok && !resourceInfoEqual(info, kubecontainer.ResourceInfoForPod(pod))
}

// cleanup drops the allocations and conditions of pods no longer desired,
// and reports whether the periodic retry of pending resizes is due.
func (r *resizer) cleanup(desired map[k8stypes.UID]bool) (retryDue bool, err error) {
	if r == nil {
		return false, nil
	}
	r.mu.Lock()
	for uid := range r.conds {
		if !desired[uid] {
			delete(r.conds, uid)
		}
	}
	for uid := range r.pending {
		if !desired[uid] {
			delete(r.pending, uid)
		}
	}
	retryDue = len(r.pending) > 0 && time.Since(r.lastRetry) >= resizeRetryPeriod
	r.mu.Unlock()
	return retryDue, r.allocated.RemoveOrphans(func(uid k8stypes.UID) bool { return desired[uid] })
}

// Conditions are the pod's resize conditions: Pending, then InProgress.
func (r *resizer) Conditions(uid k8stypes.UID) []v1.PodCondition {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.conds[uid]
	if c == nil {
		return nil
	}
	var out []v1.PodCondition
	for _, cond := range []*v1.PodCondition{c.pending, c.inProgress} {
		if cond != nil {
			out = append(out, *cond.DeepCopy())
		}
	}
	return out
}

// setCondition sets a condition, keeping its transition time when the reason
// is unchanged, and reports whether it changed (reason, message or
// generation).
func setCondition(slot **v1.PodCondition, typ v1.PodConditionType, reason, message string, generation int64) bool {
	now := metav1.Now()
	old := *slot
	if old != nil && old.Reason == reason && old.Message == message && old.ObservedGeneration == generation {
		old.LastProbeTime = now
		return false
	}
	c := &v1.PodCondition{Type: typ, Status: v1.ConditionTrue, Reason: reason, Message: message,
		ObservedGeneration: generation, LastProbeTime: now, LastTransitionTime: now}
	if old != nil && old.Reason == reason {
		c.LastTransitionTime = old.LastTransitionTime
	}
	*slot = c
	return true
}

func (r *resizer) condsOf(uid k8stypes.UID) *resizeConds {
	c := r.conds[uid]
	if c == nil {
		c = &resizeConds{}
		r.conds[uid] = c
	}
	return c
}

// infeasible says why a resize can never be admitted on this node ("" if it
// can), with upstream's messages: a resize of the pod-level resources while
// InPlacePodLevelResourcesVerticalScaling is off; with the static CPU
// manager, one of a Guaranteed pod's cpu requests; with the Static memory
// manager, one of its memory requests (CPU first, as upstream).
func (r *resizer) infeasible(pod *v1.Pod, info kubecontainer.PodResourceInfo) string {
	if r.podLevelOff && !podLevelEqual(info.PodLevelResources, pod.Spec.Resources) {
		return "InPlacePodLevelResourcesVerticalScaling is disabled"
	}
	if kubecontainer.GetPodQOS(pod) != v1.PodQOSGuaranteed {
		return ""
	}
	for _, check := range []struct {
		on   bool
		name v1.ResourceName
		msg  string
	}{
		{r.cpuStatic, v1.ResourceCPU, `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"`},
		{r.memStatic, v1.ResourceMemory, `Resize is infeasible for Guaranteed Pods alongside Memory Manager policy "Static"`},
	} {
		if !check.on {
			continue
		}
		for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for _, c := range list {
				old := info.ContainerResources[c.Name].Requests[check.name]
				if !c.Resources.Requests[check.name].Equal(old) {
					return check.msg
				}
			}
		}
	}
	return ""
}

// handleResize decides a pod's resize (upstream's handlePodResourcesResize)
// and, when it is accepted, has the pod synced.
func (k *Kubelet) handleResize(pod *v1.Pod) {
	r := k.resize
	info, ok := r.allocated.Get(pod.UID)
	if !ok {
		return
	}
	if resourceInfoEqual(info, kubecontainer.ResourceInfoForPod(pod)) {
		r.mu.Lock()
		if c := r.conds[pod.UID]; c != nil {
			c.pending = nil
		}
		delete(r.pending, pod.UID)
		r.mu.Unlock()
		return
	}
	if msg := r.infeasible(pod, info); msg != "" {
		k.setResizePending(pod, resizeReasonInfeasible, resizeReasonInfeasible, msg)
		r.mu.Lock()
		delete(r.pending, pod.UID) // retried only when the spec changes again
		r.mu.Unlock()
		return
	}
	// The resized pod must fit beside the others at their allocations.
	if reason, msg, ok := k.canAdmit(pod); !ok {
		k.setResizePending(pod, resizeReasonDeferred, reason, msg)
		r.mu.Lock()
		r.pending[pod.UID] = true
		r.mu.Unlock()
		return
	}
	if err := r.allocated.Set(pod.UID, kubecontainer.ResourceInfoForPod(pod)); err != nil {
		k.logger.Error("record the resize allocation", zap.String("pod", podRef(pod)), zap.Error(err))
		return
	}
	r.mu.Lock()
	c := r.condsOf(pod.UID)
	c.pending = nil
	c.inProgress = nil
	setCondition(&c.inProgress, v1.PodResizeInProgress, "", "", pod.Generation)
	delete(r.pending, pod.UID)
	r.mu.Unlock()
	k.logger.Info("Pod resize accepted", zap.String("pod", podRef(pod)))
	k.recorder.Eventf(pod, v1.EventTypeNormal, eventResizeStarted, "Pod resize started: %s", resizeEventJSON(pod, pod.Generation, ""))
	k.syncPodByUID(pod.UID, "pod resize accepted")
}

// setResizePending sets PodResizePending (reason Deferred or Infeasible,
// the admission's message) and records the event when it changed; the
// event's reason word is the admission's own (e.g. OutOfcpu).
func (k *Kubelet) setResizePending(pod *v1.Pod, condReason, eventWord, message string) {
	r := k.resize
	r.mu.Lock()
	c := r.condsOf(pod.UID)
	changed := setCondition(&c.pending, v1.PodResizePending, condReason, message, pod.Generation)
	r.mu.Unlock()
	if !changed {
		return
	}
	reason := eventResizeDeferred
	if condReason == resizeReasonInfeasible {
		reason = eventResizeInfeasible
	}
	k.logger.Info("Pod resize pending", zap.String("pod", podRef(pod)), zap.String("reason", condReason), zap.String("message", message))
	k.recorder.Eventf(pod, v1.EventTypeWarning, reason, "Pod resize %s: %s", eventWord, resizeEventJSON(pod, pod.Generation, message))
	k.syncPodByUID(pod.UID, "pod resize pending") // the condition reaches the pod status
}

// retryPendingResizes tries the deferred resizes again: those that do not
// ask for more first, then by priority, Guaranteed first, oldest first
// (upstream's order).
func (k *Kubelet) retryPendingResizes(trigger string) {
	r := k.resize
	if r == nil {
		return
	}
	r.mu.Lock()
	r.lastRetry = time.Now()
	uids := make([]k8stypes.UID, 0, len(r.pending))
	for uid := range r.pending {
		uids = append(uids, uid)
	}
	since := map[k8stypes.UID]time.Time{}
	for _, uid := range uids {
		if c := r.conds[uid]; c != nil && c.pending != nil {
			since[uid] = c.pending.LastTransitionTime.Time
		}
	}
	r.mu.Unlock()
	var pods []*v1.Pod
	for _, uid := range uids {
		if p, ok := k.pods.Get(uid); ok && !k.isPodInactive(p) {
			pods = append(pods, p)
		} else {
			r.mu.Lock()
			delete(r.pending, uid)
			r.mu.Unlock()
		}
	}
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if ia, ib := r.increases(a), r.increases(b); ia != ib {
			return !ia
		}
		if pa, pb := priority(a), priority(b); pa != pb {
			return pa > pb
		}
		if ga, gb := kubecontainer.GetPodQOS(a) == v1.PodQOSGuaranteed, kubecontainer.GetPodQOS(b) == v1.PodQOSGuaranteed; ga != gb {
			return ga
		}
		return since[a.UID].Before(since[b.UID])
	})
	for _, p := range pods {
		k.logger.Debug("Retrying a pending resize", zap.String("pod", podRef(p)), zap.String("trigger", trigger))
		k.handleResize(p)
	}
}

// increases reports whether the pod's resize asks for more cpu or memory
// requests than it is allocated.
func (r *resizer) increases(pod *v1.Pod) bool {
	desired := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	allocated := resourcehelper.PodRequests(r.allocatedPod(pod), resourcehelper.PodResourcesOptions{})
	for _, res := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		d, a := desired[res], allocated[res]
		if d.Cmp(a) > 0 {
			return true
		}
	}
	return false
}

func priority(p *v1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// beforeRuntimeSync keeps PodResizeInProgress while the runtime manager has
// not applied the allocation to a running container, and clears it (event
// ResizeCompleted) once it has.
func (s *podSyncer) beforeRuntimeSync(pod *v1.Pod, ps *kubecontainer.PodStatus) {
	r := s.resize
	if r == nil {
		return
	}
	inProgress := s.runtime.IsPodResizeInProgress(pod, ps)
	r.mu.Lock()
	c := r.conds[pod.UID]
	var completed *v1.PodCondition
	switch {
	case inProgress:
		c = r.condsOf(pod.UID)
		if c.inProgress == nil {
			setCondition(&c.inProgress, v1.PodResizeInProgress, "", "", pod.Generation)
		}
	case c != nil && c.inProgress != nil:
		completed, c.inProgress = c.inProgress, nil
	}
	r.mu.Unlock()
	if completed != nil {
		s.recorder.Eventf(pod, v1.EventTypeNormal, eventResizeCompleted, "Pod resize completed: %s", resizeEventJSON(pod, completed.ObservedGeneration, ""))
	}
}

// afterRuntimeSync turns a failed in-place resize into PodResizeInProgress
// with reason Error (event ResizeError when it changed).
func (s *podSyncer) afterRuntimeSync(pod *v1.Pod, result kubecontainer.PodSyncResult) {
	r := s.resize
	if r == nil {
		return
	}
	for _, res := range result.SyncResults {
		if res.Action != kubecontainer.ResizePodInPlace {
			continue
		}
		// The runtime's view of the resources changed without any state
		// change: the next relist reads the pod again.
		s.pleg.RequestPodReinspect(pod.UID)
		if res.Error == nil {
			continue
		}
		r.mu.Lock()
		c := r.condsOf(pod.UID)
		gen := pod.Generation
		if c.inProgress != nil {
			gen = c.inProgress.ObservedGeneration
		}
		changed := setCondition(&c.inProgress, v1.PodResizeInProgress, resizeReasonError, res.Message, gen)
		r.mu.Unlock()
		if changed {
			s.recorder.Eventf(pod, v1.EventTypeWarning, eventResizeError, "Pod resize error: %s", resizeEventJSON(pod, gen, res.Message))
		}
	}
}

// resizeEventJSON is the JSON of upstream's resize event messages: the
// containers' resources, the generation and the error, if any.
func resizeEventJSON(pod *v1.Pod, generation int64, errMsg string) string {
	type container struct {
		Name      string                  `json:"name"`
		Resources v1.ResourceRequirements `json:"resources"`
	}
	info := struct {
		InitContainers []container `json:"initContainers,omitempty"`
		Containers     []container `json:"containers,omitempty"`
		Generation     int64       `json:"generation"`
		Error          string      `json:"error,omitempty"`
	}{Generation: generation, Error: errMsg}
	for _, c := range pod.Spec.InitContainers {
		info.InitContainers = append(info.InitContainers, container{Name: c.Name, Resources: c.Resources})
	}
	for _, c := range pod.Spec.Containers {
		info.Containers = append(info.Containers, container{Name: c.Name, Resources: c.Resources})
	}
	b, err := json.Marshal(info)
	if err != nil {
		return fmt.Sprintf("%+v", info)
	}
	return string(b)
}
