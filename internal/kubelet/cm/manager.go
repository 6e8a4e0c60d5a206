package cm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"

	"github.com/prometheus/client_golang/prometheus"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/lifecycle"
)

// Names of the kubelet's cgroups under the node-allocatable root.
const (
	kubepodsName   = "kubepods"
	burstableName  = "burstable"
	besteffortName = "besteffort"
	podPrefix      = "pod"
	// qosUpdatePeriod is how often the QoS cgroups are brought up to date
	// besides the updates as pods come and go (upstream: 1 minute).
	qosUpdatePeriod = time.Minute
)

// Options configures a Manager.
type Options struct {
	// cgroups.Kind is the cgroup driver (cgroupfs or systemd).
	Driver cgroups.Kind
	// CgroupRoot is --cgroup-root: "" means "/".
	CgroupRoot string
	// CgroupsPerQOS is --cgroups-per-qos: false manages no cgroup at all
	// (pods run in the runtime's default parent).
	CgroupsPerQOS bool
	// PodPidsLimit is --pod-max-pids; <= 0 writes no limit on pod cgroups.
	PodPidsLimit int64
	// Pod holds --cpu-cfs-quota and --cpu-cfs-quota-period.
	Pod PodConfig
	// Kubepods is the node-allocatable cgroup's configuration (memory, cpu
	// shares, pids); nil leaves its values alone.
	Kubepods *cgroups.Resources
	// Reserved are the existing cgroups enforceNodeAllocatable names
	// (system-reserved, kube-reserved, or their -compressible forms): Start
	// sets their values and fails if one is missing, as upstream.
	Reserved []ReservedCgroup
	// Recorder records events about the node (NodeRef); nil drops them.
	Recorder record.EventRecorder
	NodeRef  *v1.ObjectReference
	// Mounts are the cgroup hierarchies (cgroups.Host.Mounts of
	// /proc/self/mountinfo); nil reads them.
	Mounts *cgroups.Mounts
	// Units is systemd for the systemd driver; nil connects to it over D-Bus.
	Units cgroups.UnitManager
	// Registerer receives kubelet_cgroup_manager_duration_seconds; nil: not
	// registered.
	Registerer prometheus.Registerer
	Logger     *zap.Logger
	// ActivePods are the pods the burstable QoS cgroup is sized for (the pod
	// manager's). Optional: nil sizes it for none.
	ActivePods func() []*v1.Pod
	// KubeletCgroup is kubeletCgroups: the cgroup (a cgroupfs path, whatever
	// the driver, as upstream) this process is kept in, checked every
	// minute; "" leaves it where it runs.
	KubeletCgroup string
	// QOSReservedMemory is qosReserved's memory percentage with the
	// QOSReserved gate (nil: none): the burstable and besteffort QoS cgroups
	// then leave that share of the higher classes' memory requests free of
	// the node's AllocatableMemory (capacity less systemReserved and
	// kubeReserved).
	QOSReservedMemory *int64
	AllocatableMemory int64
}

// ReservedCgroup is a reservation enforced on an existing cgroup.
type ReservedCgroup struct {
	// What names the reservation in upstream's messages: "System Reserved",
	// "Kube Reserved", "System Reserved Compressible" or "Kube Reserved
	// Compressible".
	What string
	// Cgroup is --system-reserved-cgroup or --kube-reserved-cgroup.
	Cgroup string
	// Config holds the values: cpu shares, memory and pids from the
	// reservation, cpu shares only for the compressible forms; nil when no
	// reservation is configured (an error, as upstream).
	Config *cgroups.Resources
}

// The node events of enforcement (upstream's reasons).
const (
	EventSuccessfulEnforcement = "SuccessfulNodeAllocatableEnforcement"
	EventFailedEnforcement     = "FailedNodeAllocatableEnforcement"
)

// Manager is the node's cgroup tree: the node-allocatable cgroup (kubepods
// under --cgroup-root), the burstable and besteffort QoS cgroups and one
// cgroup per pod (Guaranteed pods directly under kubepods), as upstream's
// container manager lays it out. Disabled (--cgroups-per-qos=false) every
// method is a no-op and pods get no cgroup parent.
type Manager struct {
	driver    cgroups.Kind
	enabled   bool
	cg        cgroups.Driver // nil when disabled
	durations *prometheus.HistogramVec
	pod       PodConfig
	pidLimit  int64
	kubepods  *cgroups.Resources
	reserved  []ReservedCgroup
	event     func(eventType, reason, message string) // about the node
	logger    *zap.Logger
	loops     lifecycle.Loops // what Start began
	// activePods are the pods the burstable QoS cgroup is sized for.
	activePods func() []*v1.Pod
	// kubeletCgroup is where this process is kept ("": nowhere); mounts
	// are the hierarchies it is in.
	kubeletCgroup string
	mounts        cgroups.Mounts
	// qosReserved is the memory percentage QoS reservation (nil: none) of
	// allocatable bytes.
	qosReserved *int64
	allocatable int64

	root, burstable, besteffort cgroups.Name

	mu sync.Mutex // serialises QoS updates
}

// New checks opts and finds the cgroup hierarchies; Start creates the tree.
func New(opts Options) (*Manager, error) {
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	durations, err := newDurations(opts.Registerer)
	if err != nil {
		return nil, err
	}
	m := &Manager{driver: opts.Driver, enabled: opts.CgroupsPerQOS, pod: opts.Pod, pidLimit: opts.PodPidsLimit,
		kubepods: opts.Kubepods, reserved: opts.Reserved, durations: durations, logger: logger.Named("cm"),
		activePods: opts.ActivePods, qosReserved: opts.QOSReservedMemory, allocatable: opts.AllocatableMemory}
	if m.activePods == nil {
		m.activePods = func() []*v1.Pod { return nil }
	}
	m.event = kubecontainer.NodeEvents(opts.Recorder, opts.NodeRef)
	host := cgroups.NewHost("/proc")
	mounts := opts.Mounts
	if mounts == nil && (m.enabled || opts.KubeletCgroup != "") {
		mi, err := host.Mounts()
		if err != nil {
			return nil, err
		}
		mounts = &mi
	}
	if opts.KubeletCgroup != "" {
		// Below the root, as libcontainer reads a relative name.
		m.kubeletCgroup, m.mounts = path.Clean("/"+opts.KubeletCgroup), *mounts
	}
	if !m.enabled {
		return m, nil
	}
	if m.driver != cgroups.Cgroupfs && m.driver != cgroups.Systemd {
		return nil, fmt.Errorf("cgroup driver %q: want cgroupfs or systemd", m.driver)
	}
	rootPath := opts.CgroupRoot
	if rootPath == "" {
		rootPath = "/"
	}
	base, err := m.driver.Parse(rootPath)
	if err != nil {
		return nil, fmt.Errorf("--cgroup-root=%q: %w", opts.CgroupRoot, err)
	}
	if m.root, err = cgroups.NewName(base, kubepodsName); err != nil {
		return nil, fmt.Errorf("--cgroup-root=%q: %w", opts.CgroupRoot, err)
	}
	m.burstable, _ = cgroups.NewName(m.root, burstableName)
	m.besteffort, _ = cgroups.NewName(m.root, besteffortName)
	if m.cg, err = newDriver(m.driver, host, *mounts, opts.Units); err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	return m, nil
}

// newDriver is the cgroup driver of kind: the systemd one talks to systemd
// through units, or through its D-Bus API when units is nil.
func newDriver(kind cgroups.Kind, host *cgroups.Host, mounts cgroups.Mounts, units cgroups.UnitManager) (cgroups.Driver, error) {
	if kind == cgroups.Cgroupfs {
		return cgroups.NewCgroupfs(mounts)
	}
	if units == nil {
		if err := DriverUsable(kind); err != nil {
			return nil, err
		}
		// The connection lives as long as its context: the process's.
		conn, err := sddbus.NewWithContext(context.Background())
		if err != nil {
			return nil, fmt.Errorf("connect to systemd: %w", err)
		}
		units = conn
	}
	under, err := host.InitCgroup()
	if err != nil {
		return nil, err
	}
	return cgroups.NewSystemd(mounts, units, under)
}

// path is n under the manager's driver.
func (m *Manager) path(n cgroups.Name) string { return m.driver.Path(n) }

// Start creates the node-allocatable cgroup (with the Kubepods values) and the
// QoS cgroups (besteffort with the minimum cpu shares, burstable sized for
// the active pods), then keeps the QoS cgroups current in the background
// until ctx ends (Wait waits for that).
func (m *Manager) Start(ctx context.Context) error {
	if m.kubeletCgroup != "" {
		m.loops.Go(m.logger, "kubelet cgroup", func() { m.keepInKubeletCgroup(ctx) })
	}
	if err := m.setUp(); err != nil {
		return err
	}
	if m.enabled {
		m.loops.Go(m.logger, "QoS cgroups", func() { m.run(ctx) })
	}
	return nil
}

// Wait returns once the loop Start began has ended.
func (m *Manager) Wait() { m.loops.Wait() }

// setUp is Start's work before the loop.
func (m *Manager) setUp() error {
	if !m.enabled {
		return nil
	}
	// A missing --cgroup-root is created with kubepods (upstream refuses to
	// start without it).
	if err := m.ensure(m.root, m.kubepods); err != nil {
		m.event(v1.EventTypeWarning, EventFailedEnforcement, fmt.Sprintf("Failed to update Node Allocatable Limits %q: %v", m.path(m.root), err))
		return err
	}
	if err := m.cg.ClearMemoryProtection(m.root); err != nil {
		return fmt.Errorf("clear the memory protection of %s: %w", m.path(m.root), err)
	}
	m.event(v1.EventTypeNormal, EventSuccessfulEnforcement, "Updated Node Allocatable limit across pods")
	if err := m.enforceReserved(); err != nil {
		return err
	}
	minShares := uint64(cgroups.MinShares)
	if err := m.ensure(m.besteffort, &cgroups.Resources{CPUShares: &minShares}); err != nil {
		return err
	}
	if err := m.ensure(m.burstable, nil); err != nil {
		return err
	}
	return m.UpdateQoS(m.activePods())
}

// enforceReserved sets the reservations on their existing cgroups, with
// upstream's events and errors.
func (m *Manager) enforceReserved() error {
	for _, r := range m.reserved {
		err := m.setExisting(r)
		if err != nil {
			msg := fmt.Sprintf("Failed to enforce %s Cgroup Limits on %q: %v", r.What, r.Cgroup, err)
			m.event(v1.EventTypeWarning, EventFailedEnforcement, msg)
			return errors.New(msg)
		}
		what := strings.ToLower(strings.TrimSuffix(r.What, " Compressible"))
		m.event(v1.EventTypeNormal, EventSuccessfulEnforcement, fmt.Sprintf("Updated limits on %s cgroup %v", what, r.Cgroup))
		m.logger.Info("Enforced node allocatable reservation", zap.String("reservation", r.What), zap.String("cgroup", r.Cgroup))
	}
	return nil
}

// setExisting writes r's values into its cgroup, which must exist.
func (m *Manager) setExisting(r ReservedCgroup) error {
	name, err := m.driver.Parse(r.Cgroup)
	if err != nil {
		return err
	}
	if r.Config == nil {
		return fmt.Errorf("%q cgroup is not configured properly", []string(name))
	}
	if err := m.cg.Validate(name); err != nil {
		return err
	}
	return m.update(name, r.Config)
}

// run brings the QoS cgroups up to date every minute (besides the updates as
// pods come and go) until ctx ends, for the active pods.
func (m *Manager) run(ctx context.Context) {
	t := time.NewTicker(qosUpdatePeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := m.UpdateQoS(m.activePods()); err != nil {
				m.logger.Error("update QoS cgroups", zap.Error(err))
			}
		}
	}
}

// keepInKubeletCgroup puts this process into kubeletCgroups now and every
// minute until ctx ends (upstream's ensureStateFunc of the kubelet's system
// container): a process moved out is moved back. A failure is logged. A
// kubelet outside the host's PID namespace (in a container) is left where
// it is, as upstream.
func (m *Manager) keepInKubeletCgroup(ctx context.Context) {
	wait.UntilWithContext(ctx, func(context.Context) {
		if !inHostPIDNamespace() {
			m.logger.Debug("Process is not running in the host's pid namespace; kubeletCgroups left alone")
			return
		}
		if err := cgroups.AddProcess(m.mounts, m.kubeletCgroup, os.Getpid()); err != nil {
			m.logger.Info("Failed to ensure state", zap.String("containerName", m.kubeletCgroup), zap.Error(err))
		}
	}, time.Minute)
}

// ensure creates n with rc, or sets rc on an existing n.
func (m *Manager) ensure(n cgroups.Name, rc *cgroups.Resources) error {
	if m.cg.Exists(n) {
		return m.update(n, rc)
	}
	return m.create(n, rc)
}

// UpdateQoS sets the burstable cgroup's cpu shares to the sum of the
// Burstable pods' cpu requests and besteffort's to the minimum.
//
// With qosReserved's memory (the QOSReserved gate), the burstable cgroup's
// memory limit is the node's allocatable memory less that percentage of the
// Guaranteed pods' memory requests, besteffort's that less the percentage of
// the Burstable pods' requests, as upstream's setMemoryReserve. A limit the
// kernel refuses (usage already above it) is set to the usage instead, which
// stops the class from growing (upstream's retrySetMemoryReserve).
func (m *Manager) UpdateQoS(pods []*v1.Pod) error {
	if !m.enabled {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var milli int64
	memory := map[v1.PodQOSClass]int64{}
	for _, p := range pods {
		qos := kubecontainer.GetPodQOS(p)
		if qos == v1.PodQOSBestEffort {
			continue
		}
		reqs := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		if qos == v1.PodQOSBurstable {
			milli += reqs.Cpu().MilliValue()
		}
		memory[qos] += reqs.Memory().Value()
	}
	shares, minShares := cgroups.MilliCPUToShares(milli), uint64(cgroups.MinShares)
	burstable, besteffort := &cgroups.Resources{CPUShares: &shares}, &cgroups.Resources{CPUShares: &minShares}
	if m.qosReserved != nil && m.allocatable > 0 {
		b := m.allocatable - memory[v1.PodQOSGuaranteed]**m.qosReserved/100
		be := b - memory[v1.PodQOSBurstable]**m.qosReserved/100
		burstable.Memory, besteffort.Memory = &b, &be
	}
	errB, errBE := m.update(m.burstable, burstable), m.update(m.besteffort, besteffort)
	if errB == nil && errBE == nil || m.qosReserved == nil {
		return errors.Join(errB, errBE)
	}
	for _, c := range []struct {
		n cgroups.Name
		r *cgroups.Resources
	}{{m.burstable, burstable}, {m.besteffort, besteffort}} {
		applied, err := m.cg.Read(c.n)
		if err != nil {
			return fmt.Errorf("read %s for its QoS memory reservation: %w", c.n, err)
		}
		if c.r.Memory != nil && applied.MemoryUsage > *c.r.Memory {
			usage := applied.MemoryUsage
			c.r.Memory = &usage
		}
	}
	return errors.Join(m.update(m.burstable, burstable), m.update(m.besteffort, besteffort))
}

// podName is the pod's cgroup: pod<uid> under its QoS cgroup (kubepods for
// Guaranteed pods). A UID that cannot name a cgroup (empty, or holding '/'
// or '_') is an error, never a path elsewhere in the tree.
func (m *Manager) podName(pod *v1.Pod) (cgroups.Name, error) {
	parent := m.root
	switch kubecontainer.GetPodQOS(pod) {
	case v1.PodQOSBurstable:
		parent = m.burstable
	case v1.PodQOSBestEffort:
		parent = m.besteffort
	}
	return podCgroupName(parent, pod.UID)
}

// podCgroupName is pod<uid> under parent.
func podCgroupName(parent cgroups.Name, uid k8stypes.UID) (cgroups.Name, error) {
	if uid == "" {
		return nil, errors.New("pod has no UID")
	}
	n, err := cgroups.NewName(parent, podPrefix+string(uid))
	if err != nil {
		return nil, fmt.Errorf("pod UID %q cannot name a cgroup: %w", uid, err)
	}
	return n, nil
}

// NodeAllocatableCgroup is the node-allocatable cgroup (kubepods) as a path
// in the cgroup hierarchies (Driver.Dir: where stats and eviction read it),
// "" when cgroups are not managed.
func (m *Manager) NodeAllocatableCgroup() string {
	if !m.enabled {
		return ""
	}
	return m.cg.Dir(m.root)
}

// PodCgroupParent is the pod's cgroup as the CRI's cgroup_parent (the
// driver's full path); "" when cgroups are not managed (or the UID cannot
// name one: EnsurePod refuses such a pod).
func (m *Manager) PodCgroupParent(pod *v1.Pod) string {
	if !m.enabled {
		return ""
	}
	n, err := m.podName(pod)
	if err != nil {
		return ""
	}
	return m.path(n)
}

// PodCgroupExists reports whether the pod's cgroup exists (always true when
// cgroups are not managed).
func (m *Manager) PodCgroupExists(pod *v1.Pod) bool {
	if !m.enabled {
		return true
	}
	n, err := m.podName(pod)
	return err == nil && m.cg.Exists(n)
}

// EnsurePod creates the pod's cgroup with upstream's values (the QoS
// cgroups updated first) unless it exists; an existing one is left as it is.
func (m *Manager) EnsurePod(pod *v1.Pod, active []*v1.Pod) error {
	if !m.enabled {
		return nil
	}
	n, err := m.podName(pod)
	if err != nil {
		return err
	}
	if m.cg.Exists(n) {
		return nil
	}
	if err := m.UpdateQoS(active); err != nil {
		return err
	}
	rc := ResourceConfigForPod(pod, m.pod)
	if m.pidLimit > 0 {
		rc.PidsLimit = &m.pidLimit
	}
	if err := m.create(n, rc); err != nil {
		return fmt.Errorf("create the cgroup of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// DestroyPod removes the cgroups of the pod uid (in whichever QoS class),
// killing what still runs in them.
func (m *Manager) DestroyPod(uid k8stypes.UID) error {
	if !m.enabled {
		return nil
	}
	var errs []error
	for _, parent := range []cgroups.Name{m.root, m.burstable, m.besteffort} {
		n, err := podCgroupName(parent, uid)
		if err != nil {
			return err
		}
		errs = append(errs, m.destroy(n))
	}
	return errors.Join(errs...)
}

// PodUIDs lists the pods that have a cgroup, from the QoS directories.
func (m *Manager) PodUIDs() (map[k8stypes.UID]bool, error) {
	out := map[k8stypes.UID]bool{}
	if !m.enabled {
		return out, nil
	}
	for _, parent := range []cgroups.Name{m.root, m.burstable, m.besteffort} {
		names, err := m.cg.Children(parent)
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			n, err := m.driver.Parse(name)
			if err != nil || len(n) == 0 {
				continue
			}
			if uid, ok := strings.CutPrefix(n[len(n)-1], podPrefix); ok && uid != "" {
				out[k8stypes.UID(uid)] = true
			}
		}
	}
	return out, nil
}

// CleanupOrphans removes the cgroups of pods not in active.
func (m *Manager) CleanupOrphans(active map[k8stypes.UID]bool) error {
	uids, err := m.PodUIDs()
	if err != nil {
		return err
	}
	var errs []error
	for uid := range uids {
		if !active[uid] {
			m.logger.Info("removing the cgroup of an orphaned pod", zap.String("podUID", string(uid)))
			errs = append(errs, m.DestroyPod(uid))
		}
	}
	return errors.Join(errs...)
}

// systemdBooted reports whether systemd is the init system (sd_booted).
// DriverUsable says why this node cannot use a cgroup driver (nil when it
// can): the systemd driver needs systemd as the init system.
func DriverUsable(kind cgroups.Kind) error {
	if kind == cgroups.Systemd && !systemdBooted() {
		return errors.New("the systemd cgroup driver needs systemd as the init system, which this host does not run " +
			"(no /run/systemd/system): use the cgroupfs driver (the kubelet takes Docker's: set Docker's native.cgroupdriver=cgroupfs)")
	}
	return nil
}

func systemdBooted() bool {
	fi, err := os.Lstat("/run/systemd/system")
	return err == nil && fi.IsDir()
}

// PidCapacity is the node's pid capacity as upstream counts it:
// min(kernel.pid_max, kernel.threads-max).
func PidCapacity() (int64, error) {
	var out int64 = -1
	for _, f := range []string{"/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max"} {
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", f, err)
		}
		if out < 0 || v < out {
			out = v
		}
	}
	return out, nil
}

// PodCgroupResources reads the pod cgroup's cpu shares, CFS quota and period,
// memory limit (-1 for none) and memory usage, for an in-place resize.
func (m *Manager) PodCgroupResources(pod *v1.Pod) (kubecontainer.PodCgroupResources, error) {
	var out kubecontainer.PodCgroupResources
	if !m.enabled {
		return out, nil
	}
	n, err := m.podName(pod)
	if err != nil {
		return out, err
	}
	a, err := m.cg.Read(n)
	return kubecontainer.PodCgroupResources{CPUShares: a.CPUShares, CPUQuota: a.CPUQuota, CPUPeriod: a.CPUPeriod,
		Memory: a.Memory, MemoryUsage: a.MemoryUsage}, err
}

// DesiredPodCgroupResources are the values ResourceConfigForPod gives the
// (allocated) pod's cgroup; none when cgroups are not managed.
func (m *Manager) DesiredPodCgroupResources(pod *v1.Pod) kubecontainer.PodCgroupResources {
	if !m.enabled {
		return kubecontainer.PodCgroupResources{}
	}
	rc := ResourceConfigForPod(pod, m.pod)
	out := kubecontainer.PodCgroupResources{CPUShares: rc.CPUShares, CPUQuota: rc.CPUQuota, CPUPeriod: rc.CPUPeriod, Memory: rc.Memory}
	if out.Memory == nil {
		unlimited := int64(-1)
		out.Memory = &unlimited
	}
	if out.CPUQuota == nil {
		unlimited := int64(-1)
		out.CPUQuota = &unlimited
	}
	return out
}

// ResizePodCgroup writes the values set in r into the pod's cgroup.
func (m *Manager) ResizePodCgroup(pod *v1.Pod, r kubecontainer.PodCgroupResources) error {
	if !m.enabled {
		return nil
	}
	n, err := m.podName(pod)
	if err != nil {
		return err
	}
	rc := &cgroups.Resources{CPUShares: r.CPUShares, CPUQuota: r.CPUQuota, CPUPeriod: r.CPUPeriod, Memory: r.Memory}
	if err := m.update(n, rc); err != nil {
		return fmt.Errorf("resize the cgroup of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// inHostPIDNamespace says whether this process shares PID 1's PID namespace
// (upstream's isProcessRunningInHost); unknown counts as yes.
func inHostPIDNamespace() bool {
	initNS, err1 := os.Readlink("/proc/1/ns/pid")
	selfNS, err2 := os.Readlink("/proc/self/ns/pid")
	return err1 != nil || err2 != nil || initNS == selfNS
}
