package runtimehelper

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/hostsfile"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes"
)

// hostnameMaxLen caps a pod's hostname (64 bytes with the terminating NUL).
const hostnameMaxLen = 63

// RuntimeHelper is the kubelet's side of the runtime manager
// (kubecontainer.RuntimeHelper): it resolves a container's environment, mounts and
// hostname, and the pod's DNS and directories. The kubelet records each pod's
// set-up volumes in it (SetVolumes) before the pod's containers start.
type RuntimeHelper struct {
	rootDir       string
	clusterDomain string
	dns           DNSConfigurer
	cgroups       PodCgroupParenter // nil: no pod cgroups
	env           envResolver
	vols          *volumeStore
	devices       DeviceOptions // nil: none
	logger        *zap.Logger
	// writeHosts writes the pod's managed /etc/hosts (hostsfile.Write).
	writeHosts func(path string, pod *v1.Pod, podIPs []string, hostname, domain string) error
}

var _ kubecontainer.RuntimeHelper = (*RuntimeHelper)(nil)

// New builds the RuntimeHelper from opts. Build it before the runtime
// manager, which calls it, and hand the same helper to the kubelet.
func New(opts Options) (*RuntimeHelper, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	h := &RuntimeHelper{
		rootDir:       opts.RootDir,
		clusterDomain: opts.ClusterDomain,
		dns:           opts.DNS,
		cgroups:       opts.Cgroups,
		vols:          newVolumeStore(),
		devices:       opts.Devices,
		logger:        opts.Logger.Named("runtime-helper"),
		writeHosts:    hostsfile.Write,
	}
	h.env = envResolver{nodeIP: opts.NodeIP, node: opts.Node, objects: opts.EnvObjects,
		services: opts.Services, recorder: opts.Recorder, logger: opts.Logger}
	return h, nil
}

// GenerateRunContainerOptions resolves the container's environment, mounts
// (volumes, the managed /etc/hosts) and hostname; the pod's volumes must have
// been set up by SyncPod. The returned cleanup is nil.
func (h *RuntimeHelper) GenerateRunContainerOptions(ctx context.Context, pod *v1.Pod, c *v1.Container, podIP string, podIPs []string) (*kubecontainer.RunContainerOptions, func(), error) {
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
	devices, err := h.blockDevices(pod, c)
	if err != nil {
		return nil, nil, err
	}
	opts := &kubecontainer.RunContainerOptions{Envs: envs, Mounts: mounts, Devices: devices, Hostname: hostname}
	if err := h.addDeviceOptions(pod, c, opts); err != nil {
		return nil, nil, err
	}
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

// GetPodCgroupParent returns the pod's cgroup (the container manager's), ""
// when pod cgroups are not managed: the runtime's default parent.
func (h *RuntimeHelper) GetPodCgroupParent(pod *v1.Pod) string {
	if h.cgroups == nil {
		return ""
	}
	return h.cgroups.PodCgroupParent(pod)
}

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

// CheckpointsDir is RootDir/checkpoints, where container checkpoints go.
func (h *RuntimeHelper) CheckpointsDir() string { return filepath.Join(h.rootDir, "checkpoints") }

func (h *RuntimeHelper) podsDir() string { return filepath.Join(h.rootDir, "pods") }

func (h *RuntimeHelper) podContainerDir(uid k8stypes.UID, name string) string {
	return filepath.Join(h.GetPodDir(uid), "containers", name)
}

// etcHostsPath is where the pod's managed /etc/hosts lives.
func (h *RuntimeHelper) etcHostsPath(uid k8stypes.UID) string {
	return filepath.Join(h.GetPodDir(uid), "etc-hosts")
}

// SetVolumes records the pod's set-up volumes for its container mounts.
func (h *RuntimeHelper) SetVolumes(uid k8stypes.UID, infos map[string]volumes.VolumeInfo) {
	h.vols.set(uid, infos)
}

// ForgetVolumes drops the pod's volume records (volumes torn down).
func (h *RuntimeHelper) ForgetVolumes(uid k8stypes.UID) { h.vols.remove(uid) }

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

// addDeviceOptions adds what the device plugins' allocations ask of the
// container: device nodes, annotations, and before the container's own
// environment and mounts (which win: a mount path the container already
// uses is skipped), theirs.
func (h *RuntimeHelper) addDeviceOptions(pod *v1.Pod, c *v1.Container, opts *kubecontainer.RunContainerOptions) error {
	if h.devices == nil {
		return nil
	}
	dev, err := h.devices.ContainerOptions(pod, c)
	if err != nil || dev == nil {
		return err
	}
	for _, d := range dev.Devices {
		opts.Devices = append(opts.Devices, kubecontainer.DeviceInfo{PathOnHost: d.HostPath, PathInContainer: d.ContainerPath, Permissions: d.Permissions})
	}
	for _, d := range dev.CdiDevices {
		opts.CDIDevices = append(opts.CDIDevices, d.Name)
	}
	names := make([]string, 0, len(dev.Envs))
	for k := range dev.Envs {
		names = append(names, k)
	}
	slices.Sort(names)
	envs := make([]kubecontainer.EnvVar, 0, len(names)+len(opts.Envs))
	for _, k := range names {
		envs = append(envs, kubecontainer.EnvVar{Name: k, Value: dev.Envs[k]})
	}
	opts.Envs = append(envs, opts.Envs...)
	used := map[string]bool{}
	for _, m := range opts.Mounts {
		used[m.ContainerPath] = true
	}
	var mounts []kubecontainer.Mount
	for _, m := range dev.Mounts {
		if !used[m.ContainerPath] {
			mounts = append(mounts, kubecontainer.Mount{Name: "device-plugin", ContainerPath: m.ContainerPath, HostPath: m.HostPath, ReadOnly: m.ReadOnly})
		}
	}
	opts.Mounts = append(mounts, opts.Mounts...)
	if len(dev.Annotations) > 0 {
		opts.Annotations = dev.Annotations
	}
	return nil
}

// blockDevices are the container's volumeDevices: the host block devices of
// its volumeMode Block volumes at their devicePath, read-write and mknod
// ("mrw") unless the volume is read-only ("r"), as upstream gives them.
func (h *RuntimeHelper) blockDevices(pod *v1.Pod, c *v1.Container) ([]kubecontainer.DeviceInfo, error) {
	var out []kubecontainer.DeviceInfo
	for _, vd := range c.VolumeDevices {
		info, ok := h.vols.get(pod.UID, vd.Name)
		if !ok || info.Device == "" {
			return nil, fmt.Errorf("cannot find volume %q to pass into container %q as a block device", vd.Name, c.Name)
		}
		perms := "mrw"
		if info.ReadOnly {
			perms = "r"
		}
		out = append(out, kubecontainer.DeviceInfo{PathOnHost: info.Device, PathInContainer: vd.DevicePath, Permissions: perms})
	}
	return out, nil
}
