package nodestatus

import (
	"context"
	"fmt"
	goruntime "runtime"
	"strings"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// runtimeVersionTimeout bounds the runtime Version call of one status update.
const runtimeVersionTimeout = 5 * time.Second

// sample is what one status computation reads from the machine.
type sample struct {
	now      metav1.Time
	machine  machineInfo
	pressure pressure
}

// setNodeStatus fills node's status (and records condition events) from a fresh
// machine sample, in upstream's setter order: addresses, machine info, version
// info, daemon endpoints, OS/arch, the pressure conditions, Ready, then the
// schedulable event. A failing part is logged and the others still run.
func (c *Controller) setNodeStatus(ctx context.Context, node *v1.Node) {
	s := c.takeSample()
	if addrs, err := c.nodeAddresses(); err != nil {
		c.log.Error("Failed to set node addresses", zap.Error(err))
	} else {
		node.Status.Addresses = addrs
	}
	c.setMachineInfo(node, s.machine)
	c.setVersionInfo(ctx, node, s.machine)
	node.Status.DaemonEndpoints = v1.NodeDaemonEndpoints{
		KubeletEndpoint: v1.DaemonEndpoint{Port: int32(c.opts.KubeletPort)},
	}
	node.Status.NodeInfo.OperatingSystem = goruntime.GOOS
	node.Status.NodeInfo.Architecture = goruntime.GOARCH
	c.setPressureCondition(node, s.now, memoryPressureKind(), s.pressure.memory)
	c.setPressureCondition(node, s.now, diskPressureKind(), s.pressure.disk)
	c.setPressureCondition(node, s.now, pidPressureKind(), s.pressure.pid)
	c.setReadyCondition(node, s.now)
	c.recordSchedulableEvent(node)
}

// takeSample reads the machine and evaluates the eviction thresholds.
func (c *Controller) takeSample() sample {
	now := c.clock.Now()
	m, err := c.host.machine(c.opts.RootDir)
	if err != nil {
		c.log.Warn("Error reading machine info", zap.Error(err))
	}
	observed := pressure{}
	if u, err := c.host.usage(c.opts.RootDir); err != nil {
		c.log.Warn("Error reading resource usage; pressure not re-evaluated", zap.Error(err))
	} else {
		observed = observePressure(c.thresholds, u)
	}
	return sample{now: metav1.NewTime(now), machine: m, pressure: c.pressure.update(observed, now)}
}

// setMachineInfo sets the machine identifiers, the capacity (cpu, memory, pods,
// ephemeral-storage, hugepages-<size>) and the allocatable: capacity minus
// SystemReserved, KubeReserved and the hard eviction thresholds, and memory
// minus the huge pages, never below zero. Other capacity entries (extended
// resources advertised by others) are kept.
func (c *Controller) setMachineInfo(node *v1.Node, m machineInfo) {
	st := &node.Status
	st.NodeInfo.MachineID = m.machineID
	st.NodeInfo.SystemUUID = m.systemUUID
	if st.NodeInfo.BootID != "" && m.bootID != "" && st.NodeInfo.BootID != m.bootID && !c.rebootRecorded {
		c.rebootRecorded = true
		c.recordEvent(v1.EventTypeWarning, "Rebooted",
			fmt.Sprintf("Node %s has been rebooted, boot id: %s", c.opts.NodeName, m.bootID))
	}
	st.NodeInfo.BootID = m.bootID

	if st.Capacity == nil {
		st.Capacity = v1.ResourceList{}
	}
	st.Capacity[v1.ResourceCPU] = *resource.NewMilliQuantity(int64(m.numCPU)*1000, resource.DecimalSI)
	st.Capacity[v1.ResourceMemory] = *resource.NewQuantity(m.memoryCapacity, resource.BinarySI)
	st.Capacity[v1.ResourcePods] = *resource.NewQuantity(int64(c.opts.MaxPods), resource.DecimalSI)
	if m.fsCapacity > 0 {
		st.Capacity[v1.ResourceEphemeralStorage] = *resource.NewQuantity(m.fsCapacity, resource.BinarySI)
	}
	setHugePages(st.Capacity, m.hugePages)

	if st.Allocatable == nil {
		st.Allocatable = v1.ResourceList{}
	}
	for name := range st.Allocatable {
		if _, ok := st.Capacity[name]; !ok && (isExtendedResource(name) || isHugePages(name)) {
			delete(st.Allocatable, name)
		}
	}
	reserved := allocatableReservation(st.Capacity, c.opts.SystemReserved, c.opts.KubeReserved, c.thresholds)
	for name, capacity := range st.Capacity {
		v := capacity.DeepCopy()
		if r, ok := reserved[name]; ok {
			v.Sub(r)
		}
		if v.Sign() < 0 {
			v.Set(0)
		}
		st.Allocatable[name] = v
	}
	for name, pages := range st.Capacity {
		if !isHugePages(name) {
			continue
		}
		mem := st.Allocatable[v1.ResourceMemory]
		mem.Sub(pages)
		if mem.Sign() < 0 {
			mem.Set(0)
		}
		st.Allocatable[v1.ResourceMemory] = mem
	}
}

// setHugePages sets hugepages-<size> for every page size the machine has and
// drops the sizes it no longer has.
func setHugePages(capacity v1.ResourceList, pages map[int64]int64) {
	want := map[v1.ResourceName]int64{}
	for size, total := range pages {
		want[v1.ResourceName(v1.ResourceHugePagesPrefix+resource.NewQuantity(size, resource.BinarySI).String())] = total
	}
	for name := range capacity {
		if _, ok := want[name]; isHugePages(name) && !ok {
			delete(capacity, name)
		}
	}
	for name, total := range want {
		capacity[name] = *resource.NewQuantity(total, resource.BinarySI)
	}
}

// setVersionInfo sets the kernel, OS image, runtime and kubelet versions. When
// the runtime does not answer, the version reads name://Unknown, as upstream.
func (c *Controller) setVersionInfo(ctx context.Context, node *v1.Node, m machineInfo) {
	info := &node.Status.NodeInfo
	info.KernelVersion = m.kernelVersion
	info.OSImage = m.osImage
	info.KubeletVersion = c.opts.KubeletVersion
	info.KubeProxyVersion = "" // deprecated, cleared as upstream does
	if c.opts.Runtime == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, runtimeVersionTimeout)
	defer cancel()
	name, version, err := c.opts.Runtime.Version(ctx)
	if err != nil {
		c.log.Warn("Error getting the container runtime version", zap.Error(err))
		if c.runtimeName != "" {
			info.ContainerRuntimeVersion = c.runtimeName + "://Unknown"
		}
		return
	}
	c.runtimeName = name
	info.ContainerRuntimeVersion = name + "://" + version
}

// recordSchedulableEvent records NodeSchedulable/NodeNotSchedulable when
// spec.unschedulable changed since the last status update.
func (c *Controller) recordSchedulableEvent(node *v1.Node) {
	if node.Spec.Unschedulable == c.lastUnschedulable {
		return
	}
	c.lastUnschedulable = node.Spec.Unschedulable
	if node.Spec.Unschedulable {
		c.recordNodeStatusEvent(v1.EventTypeNormal, "NodeNotSchedulable")
		return
	}
	c.recordNodeStatusEvent(v1.EventTypeNormal, "NodeSchedulable")
}

// isHugePages reports whether name is a hugepages-<size> resource.
func isHugePages(name v1.ResourceName) bool {
	return strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

// isExtendedResource reports whether name is an extended resource: a
// domain-prefixed name outside kubernetes.io that is not a quota "requests." name.
func isExtendedResource(name v1.ResourceName) bool {
	s := string(name)
	return strings.Contains(s, "/") && !strings.Contains(s, v1.ResourceDefaultNamespacePrefix) &&
		!strings.HasPrefix(s, v1.DefaultResourceRequestsPrefix)
}
