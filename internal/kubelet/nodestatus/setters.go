package nodestatus

import (
	"context"
	"fmt"
	goruntime "runtime"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
)

// runtimeVersionTimeout bounds the runtime Version call of one status update.
const runtimeVersionTimeout = 5 * time.Second

// sample is what one status computation reads from the machine.
type sample struct {
	now      metav1.Time
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
	machine := c.opts.Resources.Machine()
	c.setMachineInfo(node, machine)
	c.setVersionInfo(ctx, node, machine)
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

// takeSample evaluates the eviction thresholds against a fresh usage sample.
func (c *Controller) takeSample() sample {
	now := c.clock.Now()
	observed := pressure{}
	if u, err := c.host.usage(c.opts.RootDir); err != nil {
		c.log.Warn("Error reading resource usage; pressure not re-evaluated", zap.Error(err))
	} else {
		observed = observePressure(c.opts.Resources.HardEvictionThresholds(), u)
	}
	return sample{now: metav1.NewTime(now), pressure: c.pressure.update(observed, now)}
}

// setMachineInfo sets the machine identifiers, the node's capacity (cpu,
// memory, pods, ephemeral-storage, hugepages-<size> and the extended
// resources of Options.Resources) and the allocatable of every capacity entry
// (Options.Resources.AllocatableOf). Other capacity entries (extended
// resources advertised by others) are kept; huge page sizes the machine no
// longer has are dropped.
func (c *Controller) setMachineInfo(node *v1.Node, m resources.Machine) {
	st := &node.Status
	st.NodeInfo.MachineID = m.MachineID
	st.NodeInfo.SystemUUID = m.SystemUUID
	if st.NodeInfo.BootID != "" && m.BootID != "" && st.NodeInfo.BootID != m.BootID && !c.rebootRecorded {
		c.rebootRecorded = true
		c.recordEvent(v1.EventTypeWarning, "Rebooted",
			fmt.Sprintf("Node %s has been rebooted, boot id: %s", c.opts.NodeName, m.BootID))
	}
	st.NodeInfo.BootID = m.BootID

	capacity := c.opts.Resources.Capacity()
	if st.Capacity == nil {
		st.Capacity = v1.ResourceList{}
	}
	for name := range st.Capacity {
		if _, ok := capacity[name]; !ok && resources.IsHugePages(name) {
			delete(st.Capacity, name)
		}
	}
	for name, q := range capacity {
		st.Capacity[name] = q
	}
	if st.Allocatable == nil {
		st.Allocatable = v1.ResourceList{}
	}
	for name := range st.Allocatable {
		if _, ok := st.Capacity[name]; !ok && (resources.IsExtendedResource(name) || resources.IsHugePages(name)) {
			delete(st.Allocatable, name)
		}
	}
	for name, q := range c.opts.Resources.AllocatableOf(st.Capacity) {
		st.Allocatable[name] = q
	}
}

// setVersionInfo sets the kernel, OS image, runtime and kubelet versions. When
// the runtime does not answer, the version reads name://Unknown, as upstream.
func (c *Controller) setVersionInfo(ctx context.Context, node *v1.Node, m resources.Machine) {
	info := &node.Status.NodeInfo
	info.KernelVersion = m.KernelVersion
	info.OSImage = m.OSImage
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
