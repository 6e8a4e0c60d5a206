package cpumanager

import (
	"fmt"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/cpuset"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/topologymanager"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// staticPolicy gives containers of Guaranteed pods that request a whole
// number of CPUs CPUs of their own, as upstream's static policy:
//
//   - The shared pool (the state's default set) starts as every CPU. The
//     reserved CPUs stay in it and are never handed out exclusively; with
//     strict-cpu-reservation they are out of it too, so that only the
//     system's and the kubelet's processes run on them.
//   - Allocate takes the request out of the pool minus the reserved CPUs by
//     topology (takeByTopology) and records it for the container. A
//     container already in the state keeps what it has. With full-pcpus-only
//     a request must be a multiple of the threads per core and fit in the
//     free whole cores (the cores of reserved CPUs do not count), else the
//     pod is refused with SMTAlignmentError.
//   - CPUs of a (non-restartable) init container may be reused by the next
//     containers of the same pod: they are added to what the next allocation
//     may take, because init containers do not run alongside them. CPUs of
//     restartable init containers (sidecars) keep running and are not reused.
//   - Removing a container returns its CPUs to the pool, except those still
//     held by another container of the pod (reuse).
type staticPolicy struct {
	topo     *Topology
	reserved cpuset.CPUSet
	// reservedCores are every thread of the cores of the reserved CPUs.
	reservedCores cpuset.CPUSet
	opts          staticOptions
	met           *metrics
	log           *zap.Logger
	// cpusToReuse holds, for the pod being admitted, the CPUs its init
	// containers had that later containers may take again.
	cpusToReuse map[string]cpuset.CPUSet
}

// newStaticPolicy picks the reserved CPUs: reservedCPUs when given
// (--reserved-cpus), else numReserved CPUs taken by topology from all CPUs.
func newStaticPolicy(topo *Topology, numReserved int, reservedCPUs cpuset.CPUSet, opts staticOptions, met *metrics, log *zap.Logger) (*staticPolicy, error) {
	reserved := reservedCPUs
	if reserved.IsEmpty() {
		reserved, _ = takeByTopology(topo, topo.CPUDetails.CPUs(), numReserved)
	}
	if reserved.Size() != numReserved {
		return nil, fmt.Errorf("[cpumanager] unable to reserve the required amount of CPUs (size of %s did not equal %d)", reserved, numReserved)
	}
	cores := cpuset.New()
	for _, cpu := range reserved.List() {
		info, ok := topo.CPUDetails[cpu]
		if !ok {
			return nil, fmt.Errorf("[cpumanager] unable to build the reserved physical CPUs from the reserved set: unknown CPU ID: %d", cpu)
		}
		cores = cores.Union(topo.CPUDetails.CPUsInCores(info.CoreID))
	}
	log.Info("Static policy created with configuration", zap.Bool("fullPCPUsOnly", opts.fullPCPUsOnly),
		zap.Bool("strictCPUReservation", opts.strictCPUReservation), zap.Int("cpuGroupSize", topo.CPUsPerCore()))
	log.Info("Reserved CPUs not available for exclusive assignment", zap.Int("reservedSize", reserved.Size()),
		zap.Stringer("reserved", reserved), zap.Stringer("reservedPhysicalCPUs", cores))
	return &staticPolicy{topo: topo, reserved: reserved, reservedCores: cores, opts: opts, met: met, log: log,
		cpusToReuse: map[string]cpuset.CPUSet{}}, nil
}

func (p *staticPolicy) name() string { return PolicyStatic }

// start checks a loaded state against the machine, or fills a fresh one's
// pool with every CPU. The messages are upstream's.
func (p *staticPolicy) start(st *state) error {
	if err := p.validate(st); err != nil {
		return err
	}
	p.met.initAligned()
	p.updateMetrics(st)
	return nil
}

// validate is start's check (upstream's validateState).
func (p *staticPolicy) validate(st *state) error {
	all := p.topo.CPUDetails.CPUs()
	if p.opts.strictCPUReservation {
		all = all.Difference(p.reserved)
	}
	if st.defaultSet.IsEmpty() {
		if len(st.assignments) != 0 {
			return fmt.Errorf("default cpuset cannot be empty")
		}
		st.defaultSet = all
		p.log.Info("Static policy initialized", zap.Stringer("defaultCPUSet", all))
		return nil
	}
	switch inPool := p.reserved.Intersection(st.defaultSet); {
	case p.opts.strictCPUReservation && !inPool.IsEmpty():
		return fmt.Errorf("some of strictly reserved cpus: %q are present in defaultCpuSet: %q",
			inPool.String(), st.defaultSet.String())
	case !p.opts.strictCPUReservation && !inPool.Equals(p.reserved):
		return fmt.Errorf("not all reserved cpus: %q are present in defaultCpuSet: %q",
			p.reserved.String(), st.defaultSet.String())
	}
	known := st.defaultSet.Clone()
	for pod, containers := range st.assignments {
		for name, set := range containers {
			if !st.defaultSet.Intersection(set).IsEmpty() {
				return fmt.Errorf("pod: %s, container: %s cpuset: %q overlaps with default cpuset %q",
					pod, name, set.String(), st.defaultSet.String())
			}
			known = known.Union(set)
		}
	}
	if !known.Equals(all) {
		return fmt.Errorf("current set of available CPUs %q doesn't match with CPUs in state %q",
			all.String(), known.String())
	}
	return nil
}

// available is the pool CPUs that may be handed out exclusively.
func (p *staticPolicy) available(st *state) cpuset.CPUSet {
	return st.defaultSet.Difference(p.reserved)
}

func (p *staticPolicy) allocate(st *state, pod *v1.Pod, container *v1.Container, affinity topologymanager.Mask) (err error) {
	numCPUs := guaranteedCPUs(pod, container)
	if numCPUs == 0 {
		return nil
	}
	log := p.log.With(zap.String("pod", pod.Namespace+"/"+pod.Name), zap.String("podUID", string(pod.UID)),
		zap.String("containerName", container.Name))
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		// Upstream skips pods with pod-level resources unless the
		// PodLevelResourceManagers gate (off by default) is on.
		log.Debug("CPU Manager allocation skipped, pod is using pod-level resources")
		return nil
	}
	defer func() { p.countAllocation(err) }()
	uid := string(pod.UID)
	if set, ok := st.assignments.get(uid, container.Name); ok {
		p.updateCPUsToReuse(pod, container, set)
		log.Info("Static policy: container already present in state, skipping")
		return nil
	}
	if err := p.enforceSMTAlignment(st, numCPUs); err != nil {
		return err
	}
	pool := p.available(st).Union(p.cpusToReuse[uid])
	set, err := p.takeAligned(pool, numCPUs, affinity)
	if err != nil {
		log.Error("Unable to allocate CPUs", zap.Int("numCPUs", numCPUs), zap.Error(err))
		return err
	}
	st.defaultSet = st.defaultSet.Difference(set)
	st.assignments.set(uid, container.Name, set)
	p.updateCPUsToReuse(pod, container, set)
	p.updateMetrics(st)
	if p.topo.CPUDetails.sameUncoreCache(set) {
		p.met.alignedOK.WithLabelValues(alignedUncoreCache, alignScopeContainer).Inc()
	}
	log.Info("Allocated exclusive CPUs", zap.Stringer("cpuset", set))
	return nil
}

// countAllocation moves upstream's pinning counters for one container that
// needs exclusive CPUs, with full-pcpus-only its physical_cpu alignment
// counters too (a container already in the state counts as aligned, as
// upstream).
func (p *staticPolicy) countAllocation(err error) {
	p.met.requests.Inc()
	if err != nil {
		p.met.errors.Inc()
	}
	if !p.opts.fullPCPUsOnly {
		return
	}
	if err != nil {
		p.met.alignedFailed.WithLabelValues(alignedPhysicalCPU, alignScopeContainer).Inc()
	} else {
		p.met.alignedOK.WithLabelValues(alignedPhysicalCPU, alignScopeContainer).Inc()
	}
}

// updateMetrics sets the pool and exclusive gauges from the state.
func (p *staticPolicy) updateMetrics(st *state) {
	p.met.sharedPool.Set(float64(p.available(st).Size() * 1000))
	p.met.setAssigned(p.topo, st.assignments.all())
}

// SMTAlignmentError refuses, with full-pcpus-only, a request that would not
// be made of whole physical cores. Its Type is the pod's admission reason.
type SMTAlignmentError struct {
	RequestedCPUs         int
	CPUsPerCore           int
	AvailablePhysicalCPUs int
	CausedByPhysicalCPUs  bool
}

// Error is upstream's message.
func (e SMTAlignmentError) Error() string {
	if e.CausedByPhysicalCPUs {
		return fmt.Sprintf("SMT Alignment Error: not enough free physical CPUs: available physical CPUs = %d, requested CPUs = %d, CPUs per core = %d",
			e.AvailablePhysicalCPUs, e.RequestedCPUs, e.CPUsPerCore)
	}
	return fmt.Sprintf("SMT Alignment Error: requested %d cpus not multiple cpus per core = %d", e.RequestedCPUs, e.CPUsPerCore)
}

// Type is the admission reason, upstream's.
func (SMTAlignmentError) Type() string { return "SMTAlignmentError" }

// enforceSMTAlignment is full-pcpus-only's check (upstream's): the request
// is a multiple of the threads per core and no larger than the pool without
// the cores of the reserved CPUs, so that the allocation never has to split
// a core.
func (p *staticPolicy) enforceSMTAlignment(st *state, numCPUs int) error {
	if !p.opts.fullPCPUsOnly {
		return nil
	}
	perCore := p.topo.CPUsPerCore()
	if perCore > 0 && numCPUs%perCore != 0 {
		return SMTAlignmentError{RequestedCPUs: numCPUs, CPUsPerCore: perCore}
	}
	if free := st.defaultSet.Difference(p.reservedCores).Size(); numCPUs > free {
		return SMTAlignmentError{RequestedCPUs: numCPUs, CPUsPerCore: perCore, AvailablePhysicalCPUs: free, CausedByPhysicalCPUs: true}
	}
	return nil
}

// updateCPUsToReuse keeps the reusable CPUs of the pod being admitted only:
// an init container's CPUs become reusable, anything else's stop being so.
func (p *staticPolicy) updateCPUsToReuse(pod *v1.Pod, container *v1.Container, set cpuset.CPUSet) {
	uid := string(pod.UID)
	for other := range p.cpusToReuse {
		if other != uid {
			delete(p.cpusToReuse, other)
		}
	}
	reuse := p.cpusToReuse[uid]
	for i := range pod.Spec.InitContainers {
		ic := &pod.Spec.InitContainers[i]
		if ic.Name != container.Name {
			continue
		}
		if !kubecontainer.IsSidecar(ic) {
			p.cpusToReuse[uid] = reuse.Union(set)
			return
		}
		break
	}
	p.cpusToReuse[uid] = reuse.Difference(set)
}

func (p *staticPolicy) removeContainer(st *state, podUID, containerName string) {
	release, ok := st.assignments.get(podUID, containerName)
	if !ok {
		return
	}
	st.assignments.remove(podUID, containerName)
	for _, set := range st.assignments[podUID] {
		release = release.Difference(set) // still used by a sibling
	}
	st.defaultSet = st.defaultSet.Union(release)
	p.updateMetrics(st)
	p.log.Info("RemoveContainer", zap.String("podUID", podUID), zap.String("containerName", containerName),
		zap.Stringer("defaultCPUSet", st.defaultSet))
}

func (p *staticPolicy) affinity(st *state, podUID, containerName string) cpuset.CPUSet {
	if set, ok := st.assignments.get(podUID, containerName); ok {
		return set
	}
	return st.defaultSet
}

// guaranteedCPUs is the number of exclusive CPUs a container gets: its CPU
// request when the pod is Guaranteed and the request is a whole number,
// else 0.
func guaranteedCPUs(pod *v1.Pod, container *v1.Container) int {
	if kubecontainer.GetPodQOS(pod) != v1.PodQOSGuaranteed {
		return 0
	}
	q := container.Resources.Requests[v1.ResourceCPU]
	if !isIntegralCPUAmount(q) {
		return 0
	}
	return int(q.Value())
}

func isIntegralCPUAmount(q resource.Quantity) bool {
	return q.Value()*1000 == q.MilliValue()
}
