package runtimehelper

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes"
)

// newHelper returns a helper on a fresh root dir. The subPath bind mounts a
// test leaves are torn down the kubelet's way (volumes.Manager.UnmountVolumes)
// before the directory is removed, and must be gone from mountinfo then.
func newHelper(t *testing.T) *RuntimeHelper {
	t.Helper()
	root := t.TempDir()
	h, err := New(Options{RootDir: root, DNS: fakeDNS{}, ClusterDomain: "example.local",
		NodeIP: []byte{192, 168, 1, 10}, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanSubPaths(t, h) })
	return h
}

func cleanSubPaths(t *testing.T, h *RuntimeHelper) {
	t.Helper()
	vm, err := volumes.New(volumes.Options{PodsDir: h.podsDir(), Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(h.podsDir())
	for _, e := range entries {
		if err := vm.UnmountVolumes(context.Background(), k8stypes.UID(e.Name())); err != nil {
			t.Errorf("unmount volumes of %s: %v", e.Name(), err)
		}
		if _, err := os.Lstat(filepath.Join(h.podsDir(), e.Name(), "volume-subpaths")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("volume-subpaths of %s left: %v", e.Name(), err)
		}
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), h.rootDir+"/") {
		t.Errorf("mounts left under %s:\n%s", h.rootDir, data)
	}
}

func TestGeneratePodHostNameAndDomain(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 62) + "-b"
	for _, tc := range []struct {
		desc              string
		name, host, sub   string
		override          *string
		wantHost, wantDom string
		wantErr           bool
	}{
		{desc: "pod name", name: "web", wantHost: "web"},
		{desc: "spec.hostname", name: "web", host: "front", wantHost: "front"},
		{desc: "subdomain", name: "web", host: "front", sub: "svc1", wantHost: "front", wantDom: "svc1.ns.svc.example.local"},
		{desc: "truncated to 63 without trailing dash", name: long, wantHost: strings.Repeat("a", 62)},
		{desc: "invalid hostname", name: "web", host: "Not_Valid", wantErr: true},
		{desc: "invalid subdomain", name: "web", sub: "a.b", wantErr: true},
		{desc: "hostname override", name: "web", sub: "svc1", override: ptr("my.host"), wantHost: "my.host"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			h := newHelper(t)
			pod := staticPod(tc.name, "uid", func(p *v1.Pod) {
				p.Namespace, p.Spec.Hostname, p.Spec.Subdomain, p.Spec.HostnameOverride = "ns", tc.host, tc.sub, tc.override
			})
			host, dom, err := h.GeneratePodHostNameAndDomain(pod)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want error %v", err, tc.wantErr)
			}
			if host != tc.wantHost || dom != tc.wantDom {
				t.Errorf("got %q %q, want %q %q", host, dom, tc.wantHost, tc.wantDom)
			}
		})
	}
}

func mountByPath(mounts []kubecontainer.Mount, path string) *kubecontainer.Mount {
	for i := range mounts {
		if mounts[i].ContainerPath == path {
			return &mounts[i]
		}
	}
	return nil
}

func TestGenerateRunContainerOptions(t *testing.T) {
	t.Parallel()
	h := newHelper(t)
	volDir := t.TempDir()
	hostDir := t.TempDir()
	pod := staticPod("web", "uid-web", func(p *v1.Pod) {
		p.Spec.Subdomain = "sub"
		p.Spec.HostAliases = []v1.HostAlias{{IP: "10.9.9.9", Hostnames: []string{"alias"}}}
		prop := v1.MountPropagationHostToContainer
		p.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
		p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "DIR", Value: "logs"}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
			{Name: "data", MountPath: "/data"},
			{Name: "data", MountPath: "/again", ReadOnly: true},
			{Name: "host", MountPath: "/host", MountPropagation: &prop},
			{Name: "data", MountPath: "/sub", SubPath: "a/b"},
			{Name: "data", MountPath: "/expr", SubPathExpr: "$(DIR)/x"},
			{Name: "ro", MountPath: "/ro"},
		}
	})
	h.SetVolumes(pod.UID, map[string]volumes.VolumeInfo{
		"data": {HostPath: volDir, Managed: true},
		"host": {HostPath: hostDir},
		"ro":   {HostPath: hostDir, ReadOnly: true},
	})
	opts, cleanup, err := h.GenerateRunContainerOptions(context.Background(), pod, &pod.Spec.Containers[0], "10.1.0.5", []string{"10.1.0.5"})
	if err != nil {
		t.Fatal(err)
	}
	if cleanup != nil {
		t.Error("unexpected cleanup")
	}
	if opts.Hostname != "web" || joinEnv(opts.Envs) != "DIR=logs" {
		t.Errorf("hostname %q env %v", opts.Hostname, opts.Envs)
	}
	wantDir := filepath.Join(h.GetPodDir(pod.UID), "containers", "c")
	if opts.PodContainerDir != wantDir {
		t.Errorf("PodContainerDir = %q, want %q", opts.PodContainerDir, wantDir)
	}
	if st, err := os.Stat(wantDir); err != nil || !st.IsDir() {
		t.Errorf("container dir not created: %v", err)
	}
	data := mountByPath(opts.Mounts, "/data")
	again := mountByPath(opts.Mounts, "/again")
	if data == nil || data.HostPath != volDir || !data.SELinuxRelabel || data.ReadOnly {
		t.Errorf("/data = %+v", data)
	}
	if again == nil || again.SELinuxRelabel || !again.ReadOnly {
		t.Errorf("/again = %+v, want read-only and relabelled only once", again)
	}
	if m := mountByPath(opts.Mounts, "/host"); m == nil || m.SELinuxRelabel || m.Propagation != runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER {
		t.Errorf("/host = %+v", m)
	}
	if m := mountByPath(opts.Mounts, "/ro"); m == nil || !m.ReadOnly {
		t.Errorf("/ro = %+v, want read-only from the volume", m)
	}
	// A subPath reaches the runtime as its bind mount under volume-subpaths
	// (<volume>/<container>/<volumeMount index>), never as a path in the volume.
	for path, want := range map[string]struct {
		sub string
		idx string
	}{"/sub": {"a/b", "3"}, "/expr": {"logs/x", "4"}} {
		m := mountByPath(opts.Mounts, path)
		wantHost := filepath.Join(h.GetPodDir(pod.UID), "volume-subpaths", "data", "c", want.idx)
		if m == nil || m.HostPath != wantHost {
			t.Errorf("%s = %+v, want HostPath %s", path, m, wantHost)
			continue
		}
		created, err1 := os.Stat(filepath.Join(volDir, want.sub))
		mounted, err2 := os.Stat(m.HostPath)
		if err1 != nil || err2 != nil || !created.IsDir() || !os.SameFile(created, mounted) {
			t.Errorf("subPath %s not created and mounted: %v %v", want.sub, err1, err2)
		}
	}
	hosts := mountByPath(opts.Mounts, "/etc/hosts")
	if hosts == nil || hosts.HostPath != filepath.Join(h.GetPodDir(pod.UID), "etc-hosts") {
		t.Fatalf("/etc/hosts mount = %+v", hosts)
	}
	content, err := os.ReadFile(hosts.HostPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"10.1.0.5\tweb.sub.default.svc.example.local\tweb", "10.9.9.9\talias"} {
		if !strings.Contains(string(content), want) {
			t.Errorf("hosts file lacks %q:\n%s", want, content)
		}
	}
}

func TestHostsMountRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc      string
		podIPs    []string
		hostNet   bool
		ownMount  bool
		wantHosts bool
	}{
		{desc: "no IP yet", wantHosts: false},
		{desc: "pod IP", podIPs: []string{"10.1.0.5"}, wantHosts: true},
		{desc: "host network", hostNet: true, wantHosts: true},
		{desc: "container mounts its own /etc/hosts", podIPs: []string{"10.1.0.5"}, ownMount: true, wantHosts: false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			h := newHelper(t)
			var wrote string
			h.writeHosts = func(path string, _ *v1.Pod, _ []string, _, _ string) error {
				wrote = path
				return nil
			}
			pod := staticPod("web", "uid-web", func(p *v1.Pod) { p.Spec.HostNetwork = tc.hostNet })
			if tc.ownMount {
				pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "h", MountPath: "/etc/hosts"}}
				h.SetVolumes(pod.UID, map[string]volumes.VolumeInfo{"h": {HostPath: t.TempDir()}})
			}
			opts, _, err := h.GenerateRunContainerOptions(context.Background(), pod, &pod.Spec.Containers[0], "", tc.podIPs)
			if err != nil {
				t.Fatal(err)
			}
			m := mountByPath(opts.Mounts, "/etc/hosts")
			got := m != nil && m.Name == etcHostsMountName
			if got != tc.wantHosts || (wrote != "") != tc.wantHosts {
				t.Errorf("managed hosts mounted = %v (written %q), want %v", got, wrote, tc.wantHosts)
			}
		})
	}
}

func TestMountErrors(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	for _, tc := range []struct {
		desc    string
		vm      v1.VolumeMount
		setup   func(volDir string)
		wantErr string
		is      error
	}{
		{desc: "unknown volume", vm: v1.VolumeMount{Name: "nope", MountPath: "/x"}, wantErr: "cannot find volume"},
		{desc: "absolute subPath", vm: v1.VolumeMount{Name: "data", MountPath: "/x", SubPath: "/etc"}, wantErr: "absolute"},
		{desc: "subPath with ..", vm: v1.VolumeMount{Name: "data", MountPath: "/x", SubPath: "a/../../etc"}, wantErr: "'..'"},
		{desc: "subPathExpr expanding to ..", vm: v1.VolumeMount{Name: "data", MountPath: "/x", SubPathExpr: "$(UP)/etc"}, wantErr: "'..'"},
		{desc: "symlink out of the volume", vm: v1.VolumeMount{Name: "data", MountPath: "/x", SubPath: "link/sub"},
			setup: func(volDir string) { _ = os.Symlink(outside, filepath.Join(volDir, "link")) }, is: ErrSubPathEscapes},
		{desc: "recursive read-only", vm: v1.VolumeMount{Name: "data", MountPath: "/x", ReadOnly: true,
			RecursiveReadOnly: ptr(v1.RecursiveReadOnlyEnabled)}, wantErr: "recursive read-only"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			h := newHelper(t)
			volDir := t.TempDir()
			if tc.setup != nil {
				tc.setup(volDir)
			}
			pod := staticPod("web", "uid-web", func(p *v1.Pod) {
				p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "UP", Value: ".."}}
				p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{tc.vm}
			})
			h.SetVolumes(pod.UID, map[string]volumes.VolumeInfo{"data": {HostPath: volDir}})
			_, _, err := h.GenerateRunContainerOptions(context.Background(), pod, &pod.Spec.Containers[0], "", nil)
			if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) || (tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error = %v, want %q %v", err, tc.wantErr, tc.is)
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 0 {
				t.Errorf("created outside the volume: %v", entries)
			}
		})
	}
}

// A symlink inside the volume that stays inside is followed; the runtime gets
// the bind mount of its target, so swapping the link later changes nothing.
func TestSubPathSymlinkInsideVolume(t *testing.T) {
	t.Parallel()
	h := newHelper(t)
	vol := t.TempDir()
	if err := os.Mkdir(filepath.Join(vol, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(vol, "link")); err != nil {
		t.Fatal(err)
	}
	pod := staticPod("web", "uid-web", func(p *v1.Pod) {
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/x", SubPath: "link/new"}}
	})
	h.SetVolumes(pod.UID, map[string]volumes.VolumeInfo{"data": {HostPath: vol}})
	opts, _, err := h.GenerateRunContainerOptions(context.Background(), pod, &pod.Spec.Containers[0], "", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := mountByPath(opts.Mounts, "/x")
	if m == nil {
		t.Fatalf("no mount at /x: %+v", opts.Mounts)
	}
	if err := os.Remove(filepath.Join(vol, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(vol, "link")); err != nil {
		t.Fatal(err)
	}
	created, err1 := os.Stat(filepath.Join(vol, "real", "new"))
	mounted, err2 := os.Stat(m.HostPath)
	if err1 != nil || err2 != nil || !os.SameFile(created, mounted) {
		t.Errorf("mount %s does not show real/new: %v %v", m.HostPath, err1, err2)
	}
}

func TestHelperMisc(t *testing.T) {
	t.Parallel()
	h := newHelper(t)
	pod := staticPod("web", "uid-web")
	if h.GetPodCgroupParent(pod) != "" || h.GetExtraSupplementalGroupsForPod(pod) != nil {
		t.Error("cgroup parent or supplemental groups set")
	}
	if dns, err := h.GetPodDNS(pod); err != nil || dns.Servers[0] != "10.96.0.10" {
		t.Errorf("GetPodDNS = %v, %v", dns, err)
	}
	if got, want := h.CheckpointsDir(), filepath.Join(h.rootDir, "checkpoints"); got != want {
		t.Errorf("CheckpointsDir = %q, want %q", got, want)
	}
	if _, err := New(Options{RootDir: "relative", DNS: fakeDNS{}}); err == nil {
		t.Error("New with a relative RootDir: no error")
	}
	if _, err := New(Options{RootDir: t.TempDir()}); err == nil {
		t.Error("New without DNS: no error")
	}
}
