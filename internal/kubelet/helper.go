package kubelet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/hostsfile"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes"
	"github.com/kubelet-dockershim/kubelet/internal/kuberuntime"
)

// hostnameMaxLen caps a pod's hostname (64 bytes with the terminating NUL).
const hostnameMaxLen = 63

// RuntimeHelper is the kubelet's side of the runtime manager
// (kuberuntime.RuntimeHelper): it resolves a container's environment, mounts and
// hostname, and the pod's DNS and directories.
type RuntimeHelper struct {
	rootDir       string
	clusterDomain string
	dns           DNSConfigurer
	env           envResolver
	vols          *volumeStore
	logger        *zap.Logger
	// writeHosts writes the pod's managed /etc/hosts (hostsfile.Write).
	writeHosts func(path string, pod *v1.Pod, podIPs []string, hostname, domain string) error

	capacityOnce sync.Once
	capacity     v1.ResourceList
}

var _ kuberuntime.RuntimeHelper = (*RuntimeHelper)(nil)

// NewRuntimeHelper builds the RuntimeHelper from opts (RootDir, NodeIP,
// NodeCapacity, ClusterDomain, DNS, Logger). Pass the same helper as the
// runtime manager's Helper and as Options.Helper to New.
func NewRuntimeHelper(opts Options) (*RuntimeHelper, error) {
	opts = opts.withDefaults()
	if err := opts.validateHelper(); err != nil {
		return nil, err
	}
	h := &RuntimeHelper{
		rootDir:       opts.RootDir,
		clusterDomain: opts.ClusterDomain,
		dns:           opts.DNS,
		vols:          newVolumeStore(),
		logger:        opts.Logger.Named("runtime-helper"),
		writeHosts:    hostsfile.Write,
		capacity:      opts.NodeCapacity,
	}
	h.env = envResolver{nodeIP: opts.NodeIP, capacity: h.nodeCapacity, objects: opts.EnvObjects,
		services: opts.Services, recorder: opts.Recorder, logger: opts.Logger}
	return h, nil
}

// GenerateRunContainerOptions resolves the container's environment, mounts
// (volumes, the managed /etc/hosts) and hostname; the pod's volumes must have
// been set up by SyncPod. The returned cleanup is nil.
func (h *RuntimeHelper) GenerateRunContainerOptions(ctx context.Context, pod *v1.Pod, c *v1.Container, podIP string, podIPs []string) (*kuberuntime.RunContainerOptions, func(), error) {
	hostname, domain, err := h.GeneratePodHostNameAndDomain(pod)
	if err != nil {
		return nil, nil, err
	}
	envs, err := h.env.environment(ctx, pod, c, podIP, podIPs)
	if err != nil {
		return nil, nil, err
	}
	mounts, err := h.makeMounts(pod, c, hostname, domain, podIPs, envs)
	if err != nil {
		return nil, nil, err
	}
	opts := &kuberuntime.RunContainerOptions{Envs: envs, Mounts: mounts, Hostname: hostname}
	if c.TerminationMessagePath != "" {
		dir := h.podContainerDir(pod.UID, c.Name)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			h.logger.Error("create the container's directory", zap.String("path", dir), zap.Error(err))
		} else {
			opts.PodContainerDir = dir
		}
	}
	return opts, nil, nil
}

// GetPodDNS returns the pod's DNS configuration.
func (h *RuntimeHelper) GetPodDNS(pod *v1.Pod) (*runtimeapi.DNSConfig, error) {
	return h.dns.GetPodDNS(pod)
}

// GetPodCgroupParent returns "": pod cgroups are not managed yet, so containers
// go to the runtime's default parent.
func (h *RuntimeHelper) GetPodCgroupParent(*v1.Pod) string { return "" }

// GetPodDir returns RootDir/pods/<uid>.
func (h *RuntimeHelper) GetPodDir(uid k8stypes.UID) string {
	return filepath.Join(h.podsDir(), string(uid))
}

// GetExtraSupplementalGroupsForPod returns nil (no volume-implied groups yet).
func (h *RuntimeHelper) GetExtraSupplementalGroupsForPod(*v1.Pod) []int64 { return nil }

// GeneratePodHostNameAndDomain returns the pod's hostname (spec.hostnameOverride,
// spec.hostname or the pod name, at most 63 characters) and its domain
// (<subdomain>.<namespace>.svc.<cluster domain> when spec.subdomain is set).
func (h *RuntimeHelper) GeneratePodHostNameAndDomain(pod *v1.Pod) (string, string, error) {
	if o := pod.Spec.HostnameOverride; o != nil {
		if msgs := validation.IsDNS1123Subdomain(*o); len(msgs) > 0 {
			return "", "", fmt.Errorf("pod HostnameOverride %q is not a valid DNS subdomain: %s", *o, strings.Join(msgs, ";"))
		}
		name, err := truncateHostname(pod.Name, *o)
		return name, "", err
	}
	hostname := pod.Name
	if pod.Spec.Hostname != "" {
		if msgs := validation.IsDNS1123Label(pod.Spec.Hostname); len(msgs) > 0 {
			return "", "", fmt.Errorf("pod Hostname %q is not a valid DNS label: %s", pod.Spec.Hostname, strings.Join(msgs, ";"))
		}
		hostname = pod.Spec.Hostname
	}
	hostname, err := truncateHostname(pod.Name, hostname)
	if err != nil {
		return "", "", err
	}
	domain := ""
	if sub := pod.Spec.Subdomain; sub != "" {
		if msgs := validation.IsDNS1123Label(sub); len(msgs) > 0 {
			return "", "", fmt.Errorf("pod Subdomain %q is not a valid DNS label: %s", sub, strings.Join(msgs, ";"))
		}
		domain = fmt.Sprintf("%s.%s.svc.%s", sub, pod.Namespace, h.clusterDomain)
	}
	return hostname, domain, nil
}

// truncateHostname cuts a hostname to 63 characters, then drops trailing '-'
// and '.'.
func truncateHostname(podName, hostname string) (string, error) {
	if len(hostname) <= hostnameMaxLen {
		return hostname, nil
	}
	t := strings.TrimRight(hostname[:hostnameMaxLen], "-.")
	if t == "" {
		return "", fmt.Errorf("hostname for pod %q was invalid: %q", podName, hostname)
	}
	return t, nil
}

func (h *RuntimeHelper) podsDir() string { return filepath.Join(h.rootDir, "pods") }

func (h *RuntimeHelper) podContainerDir(uid k8stypes.UID, name string) string {
	return filepath.Join(h.GetPodDir(uid), "containers", name)
}

// etcHostsPath is where the pod's managed /etc/hosts lives.
func (h *RuntimeHelper) etcHostsPath(uid k8stypes.UID) string {
	return filepath.Join(h.GetPodDir(uid), "etc-hosts")
}

// nodeCapacity returns the configured capacity or, once, the machine's.
func (h *RuntimeHelper) nodeCapacity() v1.ResourceList {
	h.capacityOnce.Do(func() {
		if h.capacity != nil {
			return
		}
		h.capacity = v1.ResourceList{v1.ResourceCPU: *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI)}
		if mem, ok := machineMemory(); ok {
			h.capacity[v1.ResourceMemory] = *resource.NewQuantity(mem, resource.BinarySI)
		}
		if size, ok := filesystemSize(h.rootDir); ok {
			h.capacity[v1.ResourceEphemeralStorage] = *resource.NewQuantity(size, resource.BinarySI)
		}
	})
	return h.capacity
}

// setVolumes records the pod's set-up volumes for its container mounts.
func (h *RuntimeHelper) setVolumes(uid k8stypes.UID, infos map[string]volumes.VolumeInfo) {
	h.vols.set(uid, infos)
}

// forgetVolumes drops the pod's volume records (volumes torn down).
func (h *RuntimeHelper) forgetVolumes(uid k8stypes.UID) { h.vols.remove(uid) }

// volumeStore holds each pod's set-up volumes and which managed volumes were
// already relabelled for SELinux (only the first container mount relabels).
type volumeStore struct {
	mu   sync.Mutex
	pods map[k8stypes.UID]*podVolumes
}

type podVolumes struct {
	infos    map[string]volumes.VolumeInfo
	labelled map[string]bool
}

func newVolumeStore() *volumeStore { return &volumeStore{pods: map[k8stypes.UID]*podVolumes{}} }

func (s *volumeStore) set(uid k8stypes.UID, infos map[string]volumes.VolumeInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pv, ok := s.pods[uid]
	if !ok {
		pv = &podVolumes{labelled: map[string]bool{}}
		s.pods[uid] = pv
	}
	pv.infos = make(map[string]volumes.VolumeInfo, len(infos))
	for k, v := range infos {
		pv.infos[k] = v
	}
}

func (s *volumeStore) get(uid k8stypes.UID, name string) (volumes.VolumeInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pv, ok := s.pods[uid]
	if !ok {
		return volumes.VolumeInfo{}, false
	}
	v, ok := pv.infos[name]
	return v, ok
}

// firstLabel reports whether this is the first mount of the volume to relabel.
func (s *volumeStore) firstLabel(uid k8stypes.UID, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	pv, ok := s.pods[uid]
	if !ok || pv.labelled[name] {
		return false
	}
	pv.labelled[name] = true
	return true
}

func (s *volumeStore) remove(uid k8stypes.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pods, uid)
}
