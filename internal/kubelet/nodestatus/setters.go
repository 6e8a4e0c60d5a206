package nodestatus

import (
	"context"
	"fmt"
	goruntime "runtime"
	"time"

	"k8s.io/utils/ptr"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
)

// runtimeVersionTimeout bounds the runtime Version call of one status update.
const runtimeVersionTimeout = 5 * time.Second

// setNodeStatus fills node's status (and records condition events), in
// upstream's setter order: addresses, machine info, version info, daemon
// endpoints, images, OS/arch, the runtime's features and handlers, the
// declared features, the pressure conditions
// (from the eviction manager), Ready, then the schedulable event. A failing part is logged and
// the others still run.
func (c *Controller) setNodeStatus(ctx context.Context, node *v1.Node) {
	now := metav1.NewTime(c.clock.Now())
	c.setAddresses(node)
	machine := c.opts.Resources.Machine()
	c.setMachineInfo(node, machine)
	c.setVersionInfo(ctx, node, machine)
	node.Status.DaemonEndpoints = v1.NodeDaemonEndpoints{
		KubeletEndpoint: v1.DaemonEndpoint{Port: int32(c.opts.KubeletPort)},
	}
	if c.opts.Images != nil {
		node.Status.Images = c.opts.Images.NodeImages(c.opts.MaxImages)
	}
	node.Status.NodeInfo.OperatingSystem = goruntime.GOOS
	node.Status.NodeInfo.Architecture = goruntime.GOARCH
	if rh := c.opts.RuntimeHandlers; rh != nil {
		if f := rh.RuntimeFeatures(); f != nil {
			node.Status.Features = f.DeepCopy()
		}
		handlers := rh.RuntimeHandlers()
		node.Status.RuntimeHandlers = make([]v1.NodeRuntimeHandler, len(handlers))
		for i := range handlers {
			handlers[i].DeepCopyInto(&node.Status.RuntimeHandlers[i])
		}
	}
	if c.opts.DeclaredFeatures != nil {
		node.Status.DeclaredFeatures = append([]string{}, c.opts.DeclaredFeatures...)
	}
	var memory, disk, pid bool
	if p := c.opts.Pressure; p != nil {
		memory, disk, pid = p.IsUnderMemoryPressure(), p.IsUnderDiskPressure(), p.IsUnderPIDPressure()
	}
	c.setPressureCondition(node, now, memoryPressureKind(), memory)
	c.setPressureCondition(node, now, diskPressureKind(), disk)
	c.setPressureCondition(node, now, pidPressureKind(), pid)
	c.setReadyCondition(node, now)
	c.recordSchedulableEvent(node)
}

// setAddresses sets status.addresses (nodeAddresses). With an external
// cloud provider, as upstream: a given node IP is also published in the
// provided-node-ip annotation (removed otherwise), addresses already set (by
// the cloud controller manager) are kept, and without a node IP only the
// hostname is reported until the provider sets them.
func (c *Controller) setAddresses(node *v1.Node) {
	specified := func(i int) bool { return len(c.opts.NodeIPs) > i && !c.opts.NodeIPs[i].IsUnspecified() }
	if c.opts.ExternalCloudProvider && specified(0) {
		ips := c.opts.NodeIPs[0].String()
		if specified(1) {
			ips += "," + c.opts.NodeIPs[1].String()
		}
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[annotationProvidedNodeIP] = ips
	} else {
		delete(node.Annotations, annotationProvidedNodeIP)
	}
	if c.opts.ExternalCloudProvider {
		if len(node.Status.Addresses) > 0 {
			return
		}
		if len(c.opts.NodeIPs) == 0 {
			node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: c.opts.Hostname}}
			return
		}
	}
	addrs, err := c.nodeAddresses()
	if err != nil {
		c.log.Error("Failed to set node addresses", zap.Error(err))
		return
	}
	node.Status.Addresses = addrs
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
	if m.SwapCapacity != 0 { // NodeSwap (GA): the machine's swap, when it has some
		st.NodeInfo.Swap = &v1.NodeSwapStatus{Capacity: ptr.To(m.SwapCapacity)}
	}
	if c.opts.RunningInUserNamespace != nil {
		st.NodeInfo.RunningInUserNamespace = ptr.To(*c.opts.RunningInUserNamespace)
	}

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
