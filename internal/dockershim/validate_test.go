package dockershim

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestValidateRequest(t *testing.T) {
	t.Parallel()
	const id64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	img := func(s string) *runtimeapi.ImageSpec { return &runtimeapi.ImageSpec{Image: s} }
	sandboxCfg := func(mod func(*runtimeapi.PodSandboxConfig)) *runtimeapi.PodSandboxConfig {
		c := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u"},
			DnsConfig: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10", "fd00::10", "fe80::1%eth0"},
				Searches: []string{"ns.svc.cluster.local"}, Options: []string{"ndots:5"}}}
		if mod != nil {
			mod(c)
		}
		return c
	}
	create := func(mod func(*runtimeapi.CreateContainerRequest)) *runtimeapi.CreateContainerRequest {
		r := &runtimeapi.CreateContainerRequest{PodSandboxId: id64, SandboxConfig: sandboxCfg(nil),
			Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: img("busybox:1"), LogPath: "c/0.log"}}
		if mod != nil {
			mod(r)
		}
		return r
	}
	for _, tc := range []struct {
		desc      string
		req       any
		wantField string // "" = valid
	}{
		{desc: "full container id", req: &runtimeapi.StartContainerRequest{ContainerId: id64}},
		{desc: "MemoryQoS unified keys", req: create(func(r *runtimeapi.CreateContainerRequest) {
			r.Config.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{
				Unified: map[string]string{"memory.min": "0", "memory.low": "0", "memory.high": "63750144"}}}
		})},
		{desc: "unified key outside MemoryQoS", req: create(func(r *runtimeapi.CreateContainerRequest) {
			r.Config.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{
				Unified: map[string]string{"cgroup.procs": "1"}}}
		}), wantField: "config.linux.resources.unified"},
		{desc: "unified path", req: &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id64,
			Linux: &runtimeapi.LinuxContainerResources{Unified: map[string]string{"../../memory.max": "1"}}}, wantField: "linux.unified"},
		{desc: "unified value not a number", req: &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id64,
			Linux: &runtimeapi.LinuxContainerResources{Unified: map[string]string{"memory.high": "1\n+memory"}}}, wantField: "linux.unified"},
		{desc: "update with max", req: &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id64,
			Linux: &runtimeapi.LinuxContainerResources{Unified: map[string]string{"memory.high": "max"}}}},
		{desc: "update of a bad id", req: &runtimeapi.UpdateContainerResourcesRequest{ContainerId: "../x"}, wantField: "container_id"},
		{desc: "container id prefix", req: &runtimeapi.ContainerStatusRequest{ContainerId: "0123abc"}},
		{desc: "empty container id", req: &runtimeapi.StopContainerRequest{}, wantField: "container_id"},
		{desc: "path in a container id", req: &runtimeapi.RemoveContainerRequest{ContainerId: "../images/x"}, wantField: "container_id"},
		{desc: "upper-case id", req: &runtimeapi.ExecSyncRequest{ContainerId: "ABC"}, wantField: "container_id"},
		{desc: "id too long", req: &runtimeapi.AttachRequest{ContainerId: id64 + "0"}, wantField: "container_id"},
		{desc: "query in a sandbox id", req: &runtimeapi.PodSandboxStatusRequest{PodSandboxId: "abc?all=1"}, wantField: "pod_sandbox_id"},
		{desc: "sandbox id of a port forward", req: &runtimeapi.PortForwardRequest{PodSandboxId: "x y"}, wantField: "pod_sandbox_id"},
		{desc: "empty list filter", req: &runtimeapi.ListContainersRequest{}},
		{desc: "list filter ids", req: &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: "abc", PodSandboxId: id64}}},
		{desc: "bad list filter sandbox id", req: &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{PodSandboxId: "../x"}}, wantField: "filter.pod_sandbox_id"},
		{desc: "bad sandbox list filter", req: &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{Id: "#"}}, wantField: "filter.id"},
		{desc: "bad sandbox stats filter", req: &runtimeapi.ListPodSandboxStatsRequest{Filter: &runtimeapi.PodSandboxStatsFilter{Id: "z"}}, wantField: "filter.id"},
		{desc: "image id", req: &runtimeapi.RemoveImageRequest{Image: img("sha256:" + id64)}},
		{desc: "bare image id", req: &runtimeapi.ImageStatusRequest{Image: img(id64)}},
		{desc: "image id prefix parses as a name", req: &runtimeapi.ImageStatusRequest{Image: img("0123abcd")}},
		{desc: "tagged name", req: &runtimeapi.PullImageRequest{Image: img("registry.k8s.io/pause:3.10")}},
		{desc: "digest reference", req: &runtimeapi.PullImageRequest{Image: img("busybox@sha256:" + id64)}},
		{desc: "bad digest", req: &runtimeapi.PullImageRequest{Image: img("busybox@sha256:abc")}, wantField: "image.image"},
		{desc: "path traversal image", req: &runtimeapi.RemoveImageRequest{Image: img("../containers/" + id64)}, wantField: "image.image"},
		{desc: "query in an image", req: &runtimeapi.ImageStatusRequest{Image: img("busybox?force=1")}, wantField: "image.image"},
		{desc: "fragment in an image", req: &runtimeapi.ImageStatusRequest{Image: img("busybox#x")}, wantField: "image.image"},
		{desc: "space in an image", req: &runtimeapi.PullImageRequest{Image: img("busy box")}, wantField: "image.image"},
		{desc: "control character in an image", req: &runtimeapi.PullImageRequest{Image: img("busybox\n")}, wantField: "image.image"},
		{desc: "no image spec", req: &runtimeapi.PullImageRequest{}, wantField: "image.image"},
		{desc: "bad image list filter", req: &runtimeapi.ListImagesRequest{Filter: &runtimeapi.ImageFilter{Image: img("../x")}}, wantField: "filter.image.image"},
		{desc: "sandbox", req: &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg(nil)}},
		{desc: "sandbox without config", req: &runtimeapi.RunPodSandboxRequest{}, wantField: "config"},
		{desc: "sandbox without metadata", req: &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg(func(c *runtimeapi.PodSandboxConfig) { c.Metadata = nil })}, wantField: "config.metadata"},
		{desc: "dns server with a newline", req: &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg(func(c *runtimeapi.PodSandboxConfig) {
			c.DnsConfig.Servers = []string{"10.0.0.10\nnameserver 6.6.6.6"}
		})}, wantField: "config.dns_config.servers"},
		{desc: "dns search with a space", req: &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg(func(c *runtimeapi.PodSandboxConfig) {
			c.DnsConfig.Searches = []string{"a b"}
		})}, wantField: "config.dns_config.searches"},
		{desc: "dns option with a newline", req: &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg(func(c *runtimeapi.PodSandboxConfig) {
			c.DnsConfig.Options = []string{"ndots:5\nnameserver"}
		})}, wantField: "config.dns_config.options"},
		{desc: "hostname", req: &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg(func(c *runtimeapi.PodSandboxConfig) { c.Hostname = "web-0.db" })}},
		{desc: "cgroup parent", req: &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg(func(c *runtimeapi.PodSandboxConfig) {
			c.Linux = &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice"}
		})}},
		{desc: "cgroup parent escaping", req: &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg(func(c *runtimeapi.PodSandboxConfig) {
			c.Linux = &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "/kubepods/../../etc"}
		})}, wantField: "config.linux.cgroup_parent"},
		{desc: "cgroup parent relative", req: &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg(func(c *runtimeapi.PodSandboxConfig) {
			c.Linux = &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "kubepods"}
		})}, wantField: "config.linux.cgroup_parent"},
		{desc: "hostname with a newline", req: &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg(func(c *runtimeapi.PodSandboxConfig) {
			c.Hostname = "web\nx"
		})}, wantField: "config.hostname"},
		{desc: "hostname too long", req: &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg(func(c *runtimeapi.PodSandboxConfig) {
			c.Hostname = strings.Repeat("a", 65)
		})}, wantField: "config.hostname"},
		{desc: "sysctls", req: &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg(func(c *runtimeapi.PodSandboxConfig) {
			c.Linux = &runtimeapi.LinuxPodSandboxConfig{Sysctls: map[string]string{"net.ipv4.ip_forward": "1", "kernel/shm_rmid_forced": "1"}}
		})}},
		{desc: "sysctl name with a path", req: &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg(func(c *runtimeapi.PodSandboxConfig) {
			c.Linux = &runtimeapi.LinuxPodSandboxConfig{Sysctls: map[string]string{"../../etc/passwd": "x"}}
		})}, wantField: "config.linux.sysctls"},
		{desc: "sysctl value with a newline", req: &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg(func(c *runtimeapi.PodSandboxConfig) {
			c.Linux = &runtimeapi.LinuxPodSandboxConfig{Sysctls: map[string]string{"kernel.msgmax": "1\n2"}}
		})}, wantField: "config.linux.sysctls"},
		{desc: "sandbox label of the shim's", req: &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg(func(c *runtimeapi.PodSandboxConfig) {
			c.Labels = map[string]string{"io.kubernetes.docker.type": "container"}
		})}, wantField: "config.labels"},
		{desc: "sandbox label colliding with a stored annotation", req: &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg(func(c *runtimeapi.PodSandboxConfig) {
			c.Labels, c.Annotations = map[string]string{"annotation.x": "y"}, map[string]string{"x": "z"}
		})}, wantField: "config.labels"},
		{desc: "a pod label named annotation.*", req: &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg(func(c *runtimeapi.PodSandboxConfig) {
			c.Labels = map[string]string{"annotation.example.com/foo": "y"}
		})}},
		{desc: "kubelet's labels", req: &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg(func(c *runtimeapi.PodSandboxConfig) {
			c.Labels = map[string]string{"io.kubernetes.pod.name": "web", "io.kubernetes.pod.uid": "u", "app": "web"}
		})}},
		{desc: "container label with a comma", req: create(func(r *runtimeapi.CreateContainerRequest) {
			r.Config.Labels = map[string]string{"a,io.kubelet-dockershim.managed": "x"}
		}), wantField: "config.labels"},
		{desc: "container", req: create(nil)},
		{desc: "container without sandbox id", req: create(func(r *runtimeapi.CreateContainerRequest) { r.PodSandboxId = "" }), wantField: "pod_sandbox_id"},
		{desc: "container without config", req: create(func(r *runtimeapi.CreateContainerRequest) { r.Config = nil }), wantField: "config"},
		{desc: "container without metadata", req: create(func(r *runtimeapi.CreateContainerRequest) { r.Config.Metadata = nil }), wantField: "config.metadata"},
		{desc: "container without image", req: create(func(r *runtimeapi.CreateContainerRequest) { r.Config.Image = nil }), wantField: "config.image.image"},
		{desc: "container with a bad image", req: create(func(r *runtimeapi.CreateContainerRequest) { r.Config.Image = img("a/../b") }), wantField: "config.image.image"},
		{desc: "container with a bad user specified image", req: create(func(r *runtimeapi.CreateContainerRequest) {
			r.Config.Image = &runtimeapi.ImageSpec{Image: "busybox", UserSpecifiedImage: "a/../b"}
		}), wantField: "config.image.user_specified_image"},
		{desc: "container without sandbox config", req: create(func(r *runtimeapi.CreateContainerRequest) { r.SandboxConfig = nil }), wantField: "sandbox_config"},
		{desc: "log path escaping", req: create(func(r *runtimeapi.CreateContainerRequest) { r.Config.LogPath = "../../x.log" }), wantField: "config.log_path"},
		{desc: "absolute log path", req: create(func(r *runtimeapi.CreateContainerRequest) { r.Config.LogPath = "/tmp/x.log" }), wantField: "config.log_path"},
		{desc: "log path with dot segments inside", req: create(func(r *runtimeapi.CreateContainerRequest) { r.Config.LogPath = "c/../d/0.log" })},
		{desc: "no log path", req: create(func(r *runtimeapi.CreateContainerRequest) { r.Config.LogPath = "" })},
		{desc: "log path of the directory itself", req: create(func(r *runtimeapi.CreateContainerRequest) { r.Config.LogPath = "c/.." }), wantField: "config.log_path"},
		{desc: "requests without input", req: &runtimeapi.VersionRequest{}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			err := validateRequest(tc.req)
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("validateRequest = %v, want valid", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), ": "+tc.wantField+": ") {
				t.Fatalf("validateRequest = %v, want InvalidArgument naming %s", err, tc.wantField)
			}
		})
	}
}

func TestSeconds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   int64
		want time.Duration
	}{
		{0, 0}, {-5, 0}, {30, 30 * time.Second},
		{math.MaxInt64, time.Duration(math.MaxInt64/int64(time.Second)) * time.Second},
		{1 << 40, time.Duration(math.MaxInt64/int64(time.Second)) * time.Second},
	} {
		if got := seconds(tc.in); got != tc.want || got < 0 {
			t.Errorf("seconds(%d) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// Stopping or removing what a malformed ID names is a no-op success (it
// names nothing); every other refusal stays InvalidArgument.
func TestIdempotentNoop(t *testing.T) {
	t.Parallel()
	const uuid = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
	for _, tc := range []struct {
		req    any
		noop   bool
		reason string
	}{
		{&runtimeapi.StopPodSandboxRequest{PodSandboxId: uuid}, true, "stop sandbox"},
		{&runtimeapi.RemovePodSandboxRequest{PodSandboxId: uuid}, true, "remove sandbox"},
		{&runtimeapi.StopContainerRequest{ContainerId: uuid}, true, "stop container"},
		{&runtimeapi.RemoveContainerRequest{ContainerId: "../x"}, true, "remove container"},
		{&runtimeapi.RemoveContainerRequest{}, false, "an empty ID is still refused"},
		{&runtimeapi.ContainerStatusRequest{ContainerId: uuid}, false, "status is not a delete"},
		{&runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: "../x"}}, false, "images keep their refusal"},
	} {
		err := validateRequest(tc.req)
		if err == nil {
			t.Fatalf("%s: validateRequest accepted %v", tc.reason, tc.req)
		}
		resp, ok := idempotentNoop(tc.req, err)
		if ok != tc.noop || (ok && resp == nil) {
			t.Errorf("%s: idempotentNoop = %v, %v; want no-op %v", tc.reason, resp, ok, tc.noop)
		}
		if !strings.Contains(err.Error(), "invalid argument: ") {
			t.Errorf("%s: error %v is not InvalidArgument", tc.reason, err)
		}
	}
}

func TestValidCDIName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"example.com/test=dev0": true, "nvidia.com/gpu=all": true, "vendor_x.io/class-1=GPU-0:1.a": true,
		"": false, "no-kind": false, "example.com/test": false, "example.com=dev0": false, "/test=dev0": false,
		"example.com/=dev0": false, "example.com/test=": false, "example.com/te st=dev0": false,
		"example.com/test=dev0;rm": false, "-example.com/test=dev0": false, "example.com/test=dev0-": false,
		"example.com/gpu.v2=0": true, "../x/test=dev0": false, "1vendor.com/gpu=0": false, "example.com/2gpu=0": false,
	} {
		if got := validCDIName(name); got != want {
			t.Errorf("validCDIName(%q) = %v, want %v", name, got, want)
		}
	}
}
