// Package podresources serves upstream's PodResources API (v1: List,
// GetAllocatableResources, Get) on <root>/pod-resources/kubelet.sock, which
// GPU and device exporters read: each active pod's containers with the
// devices the device plugins gave them, their exclusive CPUs and their
// pinned memory, and the node's allocatable devices, CPUs and memory.
// Dynamic resources (no DRA) are never reported.
package podresources

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/cpuset"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/memorymanager/state"
	"github.com/kubelet-dockershim/kubelet/internal/lifecycle"
)

// SocketName is the API's socket in its directory (upstream's
// <root>/pod-resources).
const SocketName = "kubelet.sock"

// Devices are the device plugins' allocations (devicemanager.Manager).
type Devices interface {
	// PodDevices lists each container's devices: resource -> IDs.
	PodDevices(uid k8stypes.UID) map[string]map[string][]string
	// AllocatableDevices lists the healthy devices: resource -> IDs.
	AllocatableDevices() map[string][]string
}

// CPUs are the CPU manager's exclusive assignments; nil: none.
type CPUs interface {
	ExclusiveCPUs(podUID, containerName string) (cpuset.CPUSet, bool)
	// AllocatableCPUs are those it may give exclusively.
	AllocatableCPUs() cpuset.CPUSet
}

// Memory is the memory manager's pinned memory; nil: none.
type Memory interface {
	Blocks(podUID, containerName string) []state.Block
	// AllocatableMemory is what it may pin, per NUMA node and resource.
	AllocatableMemory() []state.Block
}

// Options configures a Server.
type Options struct {
	// Dir holds the socket (required, absolute).
	Dir string
	// ActivePods lists the pods reported (required).
	ActivePods func() []*v1.Pod
	// Devices answers the devices (required).
	Devices Devices
	// CPUs answers the exclusive CPUs; nil: none.
	CPUs CPUs
	// Memory answers the pinned memory; nil: none.
	Memory Memory
	// Registerer receives upstream's kubelet_pod_resources_endpoint_*
	// families; nil: not registered.
	Registerer prometheus.Registerer
	Logger     *zap.Logger
}

// Server is the PodResources API.
type Server struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	opts    Options
	loops   lifecycle.Loops // what Start began
	metrics *metrics
}

// New checks opts.
func New(opts Options) (*Server, error) {
	if !filepath.IsAbs(opts.Dir) || opts.ActivePods == nil || opts.Devices == nil {
		return nil, errors.New("podresources: Options.Dir (absolute), ActivePods and Devices are required")
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	met, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	return &Server{opts: opts, metrics: met}, nil
}

// Start serves the API on Dir/kubelet.sock (mode 0600: root's) until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	if err := os.MkdirAll(s.opts.Dir, 0o750); err != nil {
		return fmt.Errorf("pod resources directory: %w", err)
	}
	sock := filepath.Join(s.opts.Dir, SocketName)
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("pod resources socket: %w", err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		_ = l.Close()
		return fmt.Errorf("pod resources socket: %w", err)
	}
	srv := grpc.NewServer()
	podresourcesapi.RegisterPodResourcesListerServer(srv, s)
	s.loops.Go(s.opts.Logger, "pod resources server", func() {
		if err := srv.Serve(l); err != nil {
			s.opts.Logger.Error("pod resources server", zap.Error(err))
		}
	})
	s.loops.Go(s.opts.Logger, "pod resources server stop", func() {
		<-ctx.Done()
		srv.Stop()
		_ = os.Remove(sock)
	})
	return nil
}

// Wait returns once the loops Start began have ended (after ctx ended).
func (s *Server) Wait() { s.loops.Wait() }

// List reports every active pod.
func (s *Server) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	s.metrics.total.WithLabelValues("v1").Inc()
	s.metrics.list.WithLabelValues("v1").Inc()
	pods := s.opts.ActivePods()
	out := &podresourcesapi.ListPodResourcesResponse{PodResources: make([]*podresourcesapi.PodResources, 0, len(pods))}
	for _, p := range pods {
		out.PodResources = append(out.PodResources, s.pod(p))
	}
	return out, nil
}

// Get reports one active pod.
func (s *Server) Get(_ context.Context, req *podresourcesapi.GetPodResourcesRequest) (*podresourcesapi.GetPodResourcesResponse, error) {
	s.metrics.total.WithLabelValues("v1").Inc()
	s.metrics.get.WithLabelValues("v1").Inc()
	for _, p := range s.opts.ActivePods() {
		if p.Name == req.GetPodName() && p.Namespace == req.GetPodNamespace() {
			return &podresourcesapi.GetPodResourcesResponse{PodResources: s.pod(p)}, nil
		}
	}
	s.metrics.getErrs.WithLabelValues("v1").Inc()
	return nil, status.Errorf(codes.NotFound, "pod %s in namespace %s not found", req.GetPodName(), req.GetPodNamespace())
}

// GetAllocatableResources reports the healthy devices, the CPUs the CPU
// manager may give exclusively and the memory the memory manager may pin.
func (s *Server) GetAllocatableResources(context.Context, *podresourcesapi.AllocatableResourcesRequest) (*podresourcesapi.AllocatableResourcesResponse, error) {
	s.metrics.total.WithLabelValues("v1").Inc()
	s.metrics.getAllocatable.WithLabelValues("v1").Inc()
	out := &podresourcesapi.AllocatableResourcesResponse{Devices: devicesOf(s.opts.Devices.AllocatableDevices())}
	if s.opts.CPUs != nil {
		out.CpuIds = cpuIDs(s.opts.CPUs.AllocatableCPUs())
	}
	if s.opts.Memory != nil {
		out.Memory = memoryOf(s.opts.Memory.AllocatableMemory())
	}
	return out, nil
}

func cpuIDs(set cpuset.CPUSet) []int64 {
	var out []int64
	for _, id := range set.List() {
		out = append(out, int64(id))
	}
	return out
}

// memoryOf renders memory blocks as upstream's containerMemoryFromBlock.
func memoryOf(blocks []state.Block) []*podresourcesapi.ContainerMemory {
	var out []*podresourcesapi.ContainerMemory
	for _, b := range blocks {
		m := &podresourcesapi.ContainerMemory{MemoryType: string(b.Type), Size: b.Size, Topology: &podresourcesapi.TopologyInfo{Nodes: []*podresourcesapi.NUMANode{}}}
		for _, id := range b.NUMAAffinity {
			m.Topology.Nodes = append(m.Topology.Nodes, &podresourcesapi.NUMANode{ID: int64(id)})
		}
		out = append(out, m)
	}
	return out
}

// pod is one pod's resources: its restartable init containers (sidecars)
// and its containers, as upstream lists them.
func (s *Server) pod(p *v1.Pod) *podresourcesapi.PodResources {
	out := &podresourcesapi.PodResources{Name: p.Name, Namespace: p.Namespace}
	devs := s.opts.Devices.PodDevices(p.UID)
	add := func(c *v1.Container) {
		cr := &podresourcesapi.ContainerResources{Name: c.Name, Devices: devicesOf(devs[c.Name])}
		if s.opts.CPUs != nil {
			if set, ok := s.opts.CPUs.ExclusiveCPUs(string(p.UID), c.Name); ok {
				cr.CpuIds = cpuIDs(set)
			}
		}
		if s.opts.Memory != nil {
			cr.Memory = memoryOf(s.opts.Memory.Blocks(string(p.UID), c.Name))
		}
		out.Containers = append(out.Containers, cr)
	}
	for i := range p.Spec.InitContainers {
		if c := &p.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	for i := range p.Spec.Containers {
		add(&p.Spec.Containers[i])
	}
	return out
}

func devicesOf(byResource map[string][]string) []*podresourcesapi.ContainerDevices {
	names := make([]string, 0, len(byResource))
	for r := range byResource {
		names = append(names, r)
	}
	slices.Sort(names)
	var out []*podresourcesapi.ContainerDevices
	for _, r := range names {
		out = append(out, &podresourcesapi.ContainerDevices{ResourceName: r, DeviceIds: byResource[r]})
	}
	return out
}
