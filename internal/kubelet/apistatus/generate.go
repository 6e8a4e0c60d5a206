package apistatus

import (
	"errors"
	"net"
	"sort"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/status"
)

// Default waiting reasons of containers that have not run yet (upstream values).
const (
	reasonContainerCreating = "ContainerCreating"
	reasonPodInitializing   = "PodInitializing"
)

// ProbeUpdater sets the probe-derived Ready and Started of container statuses
// (the prober).
type ProbeUpdater interface {
	UpdatePodStatus(uid k8stypes.UID, status *v1.PodStatus)
}

// StatusReader gives the status the kubelet last set for a pod (the status
// manager).
type StatusReader interface {
	GetPodStatus(uid k8stypes.UID) (v1.PodStatus, bool)
}

// Options configures a Generator.
type Options struct {
	// NodeIP is the node's IP: the pods' hostIP and the pod IP of host-network
	// pods; nil leaves them empty.
	NodeIP net.IP
	// Status gives each pod's previous status (required).
	Status StatusReader
	// Probes sets the probe-derived fields; nil: none.
	Probes ProbeUpdater
	// Reasons are the last sync's start failures (required).
	Reasons *ReasonCache
	// Resize gives the pods' resize conditions and turns on the resize
	// status fields (containers' allocatedResources and resources); nil: a
	// kubelet without in-place resize reports neither.
	Resize ResizeConditions
	// PodCgroups reads the pod cgroups and turns on the pod's own
	// allocatedResources and resources
	// (InPlacePodLevelResourcesVerticalScaling); nil: neither is reported.
	PodCgroups PodCgroupReader
	// Evict are asked, in order, whether the pod must stop now (upstream's
	// pod sync handlers: the active deadline); the first that says so makes
	// the phase Failed with its reason and message.
	Evict []EvictHandler
	// RestartRules says which stopped containers run again (the
	// ContainerRestartRules gate); the zero value is upstream's default.
	RestartRules kubecontainer.RestartRules
}

// EvictHandler decides whether a pod must be stopped (and failed) now.
type EvictHandler interface {
	ShouldEvict(pod *v1.Pod) (reason, message string, evict bool)
}

// ResizeConditions are the PodResizePending and PodResizeInProgress
// conditions the kubelet keeps for each pod.
type ResizeConditions interface {
	Conditions(uid k8stypes.UID) []v1.PodCondition
}

// Generator builds a pod's API status from the runtime's view of it, the
// previous status and the last sync's failure reasons (upstream
// generateAPIPodStatus and its helpers).
type Generator struct {
	nodeIP  net.IP
	status  StatusReader
	probes  ProbeUpdater
	reasons *ReasonCache
	resize  ResizeConditions
	evict   []EvictHandler
	rules   kubecontainer.RestartRules
	// podCgroups: see Options.PodCgroups.
	podCgroups PodCgroupReader
}

// New returns a Generator; Status and Reasons are required.
func New(opts Options) (*Generator, error) {
	if opts.Status == nil || opts.Reasons == nil {
		return nil, errors.New("apistatus: Options.Status and Options.Reasons are required")
	}
	return &Generator{nodeIP: opts.NodeIP, status: opts.Status, probes: opts.Probes, reasons: opts.Reasons, resize: opts.Resize,
		evict: opts.Evict, rules: opts.RestartRules, podCgroups: opts.PodCgroups}, nil
}

// Generate returns the pod's API status. podIsTerminal says the pod's
// containers are stopped for good (the terminating and terminated paths).
func (g *Generator) Generate(pod *v1.Pod, ps *kubecontainer.PodStatus, podIsTerminal bool) v1.PodStatus {
	if ps == nil {
		ps = &kubecontainer.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	old, found := g.status.GetPodStatus(pod.UID)
	if !found {
		old = pod.Status
	}
	restarting := g.rules.ShouldAllContainersRestart(pod, ps, &old)
	s := g.convert(pod, ps, &old, restarting)
	g.setPodLevelResources(pod, s, &old)
	all := append(append([]v1.ContainerStatus{}, s.ContainerStatuses...), s.InitContainerStatuses...)
	s.Phase = getPhase(pod, all, podIsTerminal, podHasInitialized(&pod.Spec, ps), g.rules)
	if !status.IsTerminal(s.Phase) {
		switch {
		case status.IsTerminal(old.Phase):
			s.Phase = old.Phase
		case status.IsTerminal(pod.Status.Phase):
			s.Phase = pod.Status.Phase
		}
	}
	if s.Phase == old.Phase {
		s.Reason, s.Message = old.Reason, old.Message
		if s.Reason == "" {
			s.Reason = pod.Status.Reason
		}
		if s.Message == "" {
			s.Message = pod.Status.Message
		}
	}
	for _, h := range g.evict {
		if reason, message, evict := h.ShouldEvict(pod); evict {
			s.Phase, s.Reason, s.Message = v1.PodFailed, reason, message
			break
		}
	}
	if status.IsTerminal(pod.Status.Phase) {
		s.Phase = pod.Status.Phase
	}
	if g.probes != nil {
		g.probes.UpdatePodStatus(pod.UID, s)
	}
	s.Conditions = g.conditions(pod, ps, s, &old)
	g.setIPs(pod, s)
	s.StartTime = old.StartTime.DeepCopy()
	return *s
}

// conditions keeps the conditions the kubelet does not own and computes the
// ones it owns.
func (g *Generator) conditions(pod *v1.Pod, ps *kubecontainer.PodStatus, s, old *v1.PodStatus) []v1.PodCondition {
	conds := make([]v1.PodCondition, 0, len(pod.Status.Conditions)+6)
	for _, c := range pod.Status.Conditions {
		if !g.isKubeletCondition(c.Type) {
			conds = append(conds, c)
		}
	}
	for _, c := range old.Conditions {
		if c.Type == v1.DisruptionTarget {
			conds = replaceOrAppendCondition(conds, c)
		}
	}
	all := append(append([]v1.ContainerStatus{}, s.InitContainerStatuses...), s.ContainerStatuses...)
	conds = append(conds, status.GeneratePodReadyToStartContainersCondition(pod, ps))
	// Restarting all containers in place brings the init containers back to
	// waiting: a pod initialized before stays initialized.
	wasInitialized := !g.rules.NoRestartAll && kubecontainer.PodConditionTrue(old.Conditions, v1.PodInitialized)
	conds = append(conds, status.GeneratePodInitializedCondition(pod, all, s.Phase, wasInitialized))
	conds = append(conds, status.GeneratePodReadyCondition(pod, conds, all, s.Phase))
	conds = append(conds, status.GenerateContainersReadyCondition(pod, all, s.Phase))
	conds = append(conds, v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue})
	if g.resize != nil && !status.IsTerminal(s.Phase) {
		conds = append(conds, g.resize.Conditions(pod.UID)...)
	}
	if !g.rules.NoRestartAll && kubecontainer.AllContainersCouldRestart(&pod.Spec) {
		conds = append(conds, status.GenerateAllContainersRestartingCondition(pod, ps, old, s.Phase, g.rules))
	}
	return conds
}

// setIPs fills the host IPs and, for host-network pods, the pod IPs.
func (g *Generator) setIPs(pod *v1.Pod, s *v1.PodStatus) {
	if g.nodeIP == nil {
		return
	}
	s.HostIP = g.nodeIP.String()
	s.HostIPs = []v1.HostIP{{IP: s.HostIP}}
	if pod.Spec.HostNetwork && s.PodIP == "" {
		s.PodIP = s.HostIP
		s.PodIPs = []v1.PodIP{{IP: s.PodIP}}
	}
}

// convert builds the pod IPs, QoS class and container statuses; restarting
// says the pod is restarting all its containers (RestartAllContainers).
func (g *Generator) convert(pod *v1.Pod, ps *kubecontainer.PodStatus, old *v1.PodStatus, restarting bool) *v1.PodStatus {
	var s v1.PodStatus
	for _, ip := range kubecontainer.SortPodIPs(g.nodeIP, ps.IPs) {
		s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
	}
	if len(s.PodIPs) > 0 {
		s.PodIP = s.PodIPs[0].IP
	}
	s.QOSClass = kubecontainer.GetPodQOS(pod)
	cc := convertContext{pod: pod, ps: ps, hasInit: len(pod.Spec.InitContainers) > 0,
		restartAll: !g.rules.NoRestartAll, restarting: restarting}
	s.ContainerStatuses = g.containerStatuses(cc, old.ContainerStatuses, pod.Spec.Containers, false)
	s.InitContainerStatuses = g.containerStatuses(cc, old.InitContainerStatuses, pod.Spec.InitContainers, true)
	if len(pod.Spec.EphemeralContainers) > 0 {
		// Converted as init containers, as upstream does.
		ephemeral := make([]v1.Container, len(pod.Spec.EphemeralContainers))
		for i := range pod.Spec.EphemeralContainers {
			ephemeral[i] = v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		}
		s.EphemeralContainerStatuses = g.containerStatuses(cc, old.EphemeralContainerStatuses, ephemeral, true)
	}
	return &s
}

// containerStatuses converts the runtime's statuses of containers (the regular or
// the init containers of the pod) to API statuses (upstream
// convertToAPIContainerStatuses):
//  1. every container starts Waiting (ContainerCreating, or PodInitializing when
//     the pod has init containers), keeping the previous restart count and last
//     state, or the previous status when it was terminated;
//  2. a container that was running but vanished from the runtime gets a
//     ContainerStatusUnknown last termination (exit 137); in a pod restarting
//     all its containers, one removed for it waits (RestartingAllContainers)
//     with such a last termination and one more restart;
//  3. the newest runtime status gives the state, the one before the last state;
//  4. a container the next sync will (re)start shows the last sync's failure as
//     its waiting reason (ErrImagePull, CrashLoopBackOff, ...).
func (g *Generator) containerStatuses(cc convertContext, previous []v1.ContainerStatus, containers []v1.Container, isInit bool) []v1.ContainerStatus {
	pod, ps := cc.pod, cc.ps
	oldByName := make(map[string]v1.ContainerStatus, len(previous))
	for _, s := range previous {
		oldByName[s.Name] = s
	}
	statuses := defaultStatuses(containers, oldByName, cc.hasInit)
	markVanished(cc, containers, oldByName, statuses)
	applyRuntimeStatuses(cc, oldByName, statuses)
	for i := range containers {
		c := &containers[i]
		if isInit && initDone(pod, ps, c, statuses[c.Name]) {
			continue
		}
		if !g.rules.ShouldBeRestarted(c, pod, ps) {
			continue
		}
		r, ok := g.reasons.Get(pod.UID, c.Name)
		if !ok {
			continue
		}
		st := statuses[c.Name]
		if st.State.Terminated != nil {
			st.LastTerminationState = st.State
		}
		st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: r.err.Error(), Message: r.message}}
	}
	out := make([]v1.ContainerStatus, 0, len(containers))
	for i := range containers {
		st := statuses[containers[i].Name]
		if g.resize != nil {
			setResourceStatus(st, &containers[i], ps)
		}
		out = append(out, *st)
	}
	if !isInit {
		sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	}
	return out
}

// setResourceStatus fills allocatedResources (the allocated requests) and
// resources (what runs, as the runtime reports it) of a container that has a
// runtime status; containers not created yet get neither (upstream's).
func setResourceStatus(st *v1.ContainerStatus, c *v1.Container, ps *kubecontainer.PodStatus) {
	cs := ps.FindContainerStatusByName(c.Name)
	if cs == nil {
		return
	}
	if c.Resources.Requests != nil {
		st.AllocatedResources = c.Resources.Requests.DeepCopy()
	}
	st.Resources = kubecontainer.ContainerResourcesStatus(c.Resources, cs)
}

func defaultStatuses(containers []v1.Container, old map[string]v1.ContainerStatus, hasInit bool) map[string]*v1.ContainerStatus {
	reason := reasonContainerCreating
	if hasInit {
		reason = reasonPodInitializing
	}
	statuses := make(map[string]*v1.ContainerStatus, len(containers))
	for _, c := range containers {
		st := &v1.ContainerStatus{Name: c.Name, Image: c.Image,
			State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason}}}
		if o, ok := old[c.Name]; ok {
			if o.State.Terminated != nil {
				st = o.DeepCopy()
			} else {
				st.RestartCount = o.RestartCount
				st.LastTerminationState = *o.LastTerminationState.DeepCopy()
			}
		}
		statuses[c.Name] = st
	}
	return statuses
}

// markVanished infers a termination for containers that were running before but
// that the runtime no longer reports, so the pod does not fall back to Pending.
func markVanished(cc convertContext, containers []v1.Container, old map[string]v1.ContainerStatus, statuses map[string]*v1.ContainerStatus) {
	pod, ps := cc.pod, cc.ps
	reason := reasonContainerCreating
	if cc.hasInit {
		reason = reasonPodInitializing
	}
	for _, c := range containers {
		if ps.FindContainerStatusByName(c.Name) != nil {
			continue
		}
		o, ok := old[c.Name]
		if !ok {
			continue
		}
		if cc.restartAll && cc.restarting && o.State.Waiting == nil {
			markRemovedForRestartAll(statuses[c.Name], &o)
			continue
		}
		if o.State.Terminated != nil || o.State.Running == nil {
			continue
		}
		st := statuses[c.Name]
		if st.State.Waiting == nil || st.State.Waiting.Reason != reason || st.LastTerminationState.Terminated != nil {
			continue
		}
		st.LastTerminationState.Terminated = &v1.ContainerStateTerminated{
			Reason:   status.ContainerReasonStatusUnknown,
			Message:  "The container could not be located when the pod was deleted.  The container used to be Running",
			ExitCode: 137,
		}
		if pod.DeletionTimestamp == nil {
			st.RestartCount++
		}
	}
}

// applyRuntimeStatuses sets the state from the newest runtime status of each
// container and the last state from the one before it.
func applyRuntimeStatuses(cc convertContext, old map[string]v1.ContainerStatus, statuses map[string]*v1.ContainerStatus) {
	sorted := append([]*kubecontainer.ContainerStatus{}, cc.ps.ContainerStatuses...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].CreatedAt.After(sorted[j].CreatedAt) })
	seen := map[string]int{}
	for _, cs := range sorted {
		if _, ok := statuses[cs.Name]; !ok || seen[cs.Name] >= 2 {
			continue
		}
		var oldPtr *v1.ContainerStatus
		if o, ok := old[cs.Name]; ok {
			oldPtr = &o
		}
		st := convertContainerStatus(cs, oldPtr, cc)
		if seen[cs.Name] == 0 {
			statuses[cs.Name] = st
		} else {
			statuses[cs.Name].LastTerminationState = st.State
		}
		seen[cs.Name]++
	}
}

// convertContainerStatus converts one runtime container status. With
// RestartAllContainers (cc.restartAll) the restart count never goes below the
// previous one and the previous termination is carried over, as a container
// removed to restart its pod leaves no runtime status behind.
func convertContainerStatus(cs *kubecontainer.ContainerStatus, old *v1.ContainerStatus, cc convertContext) *v1.ContainerStatus {
	id := cs.ID.String()
	st := &v1.ContainerStatus{
		Name:         cs.Name,
		RestartCount: int32(cs.RestartCount),
		Image:        cs.Image,
		ImageID:      cs.ImageRef,
		ContainerID:  id,
	}
	if old != nil {
		st.VolumeMounts = old.VolumeMounts
		if cc.restartAll {
			carryOverForRestartAll(st, old)
		}
	}
	switch {
	case cs.State == kubecontainer.StateRunning:
		st.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(cs.StartedAt)}
		if cc.restartAll && old != nil && old.State.Terminated != nil && old.RestartCount >= int32(cs.RestartCount) {
			st.RestartCount = old.RestartCount + 1
		}
	case cs.State == kubecontainer.StateCreated:
		st.State.Waiting = &v1.ContainerStateWaiting{}
	case cs.State == kubecontainer.StateExited:
		st.State.Terminated = &v1.ContainerStateTerminated{
			ExitCode:    int32(cs.ExitCode),
			Reason:      cs.Reason,
			Message:     cs.Message,
			StartedAt:   metav1.NewTime(cs.StartedAt),
			FinishedAt:  metav1.NewTime(cs.FinishedAt),
			ContainerID: id,
		}
	case cs.State == kubecontainer.StateUnknown && old != nil && old.State.Running != nil:
		reason := status.ContainerReasonStatusUnknown
		if cc.restartAll && cc.restarting {
			reason = ReasonRestartingAllContainers
		}
		st.State.Terminated = &v1.ContainerStateTerminated{
			Reason:   reason,
			Message:  "The container could not be located when the pod was terminated",
			ExitCode: 137,
		}
		st.RestartCount = old.RestartCount + 1
	default:
		st.State.Waiting = &v1.ContainerStateWaiting{}
	}
	return st
}

// initDone reports whether an init container is finished for good: it exited 0,
// or its status is gone but regular containers were created (so it completed);
// the latter also marks it Completed.
// isEphemeral: name is one of the pod's ephemeral containers.
func isEphemeral(pod *v1.Pod, name string) bool {
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return true
		}
	}
	return false
}

func initDone(pod *v1.Pod, ps *kubecontainer.PodStatus, c *v1.Container, st *v1.ContainerStatus) bool {
	s := ps.FindContainerStatusByName(c.Name)
	if s != nil && s.State == kubecontainer.StateExited && s.ExitCode == 0 {
		return true
	}
	// (Not for an ephemeral container, which upstream converts as an init
	// container too: one not created yet would show Completed before it ran,
	// and kubectl debug would attach to nothing.)
	if s == nil && !status.IsRestartableInitContainer(c) && !isEphemeral(pod, c.Name) && anyRegularContainerCreated(pod, ps) && st.State.Waiting != nil {
		st.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			Reason:   "Completed",
			Message:  "Unable to get init container status from container runtime and pod has been initialized, treat it as exited normally",
			ExitCode: 0,
		}}
		return true
	}
	return false
}

func anyRegularContainerCreated(pod *v1.Pod, ps *kubecontainer.PodStatus) bool {
	for _, c := range pod.Spec.Containers {
		if ps.FindContainerStatusByName(c.Name) != nil {
			return true
		}
	}
	return false
}

// isKubeletCondition reports whether the kubelet owns the condition type
// (upstream PodConditionByKubelet): AllContainersRestarting only with its gate.
func (g *Generator) isKubeletCondition(t v1.PodConditionType) bool {
	switch t {
	case v1.PodScheduled, v1.PodReady, v1.PodInitialized, v1.ContainersReady, v1.PodReadyToStartContainers,
		v1.PodResizePending, v1.PodResizeInProgress:
		return true
	case v1.AllContainersRestarting:
		return !g.rules.NoRestartAll
	}
	return false
}

func replaceOrAppendCondition(conds []v1.PodCondition, c v1.PodCondition) []v1.PodCondition {
	for i := range conds {
		if conds[i].Type == c.Type {
			conds[i] = c
			return conds
		}
	}
	return append(conds, c)
}
