//go:build linux

package dockershim_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// wantInvalid fails unless err is InvalidArgument naming field.
func wantInvalid(t *testing.T, what string, err error, field string) {
	t.Helper()
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), field) {
		t.Errorf("%s: got %v, want InvalidArgument naming %s", what, err, field)
	}
}

// An image reference that is a path reaches neither Docker's API path nor a
// container of someone else: RemoveImage of "../containers/<id>" used to delete
// that (non-Kubernetes) container.
func TestIntegrationHostileImageReferences(t *testing.T) {
	e := newEnv(t, true)
	s := startShim(t, e)
	ctx := ctxT(t)
	out, err := exec.Command("docker", "create", "--label", testLabel+"="+e.runID, busyboxImage, "true").Output()
	if err != nil {
		t.Fatalf("docker create: %v", err)
	}
	victim := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", victim).Run() })

	for _, ref := range []string{"../containers/" + victim, "../containers/" + victim + "?force=1", "busybox#x", "busy box", "busybox\nx"} {
		_, err := s.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		wantInvalid(t, "RemoveImage "+ref, err, "image.image")
		_, err = s.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		wantInvalid(t, "ImageStatus "+ref, err, "image.image")
		_, err = s.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		wantInvalid(t, "PullImage "+ref, err, "image.image")
	}
	// A path-like ID names nothing: a status is InvalidArgument, a stop or
	// remove succeeds (idempotent, as for any unknown ID) without reaching
	// Docker.
	for _, id := range []string{"../" + victim, victim + "/json", strings.ToUpper(victim)} {
		_, err := s.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		wantInvalid(t, "ContainerStatus "+id, err, "container_id")
		_, err = s.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
		wantInvalid(t, "PodSandboxStatus "+id, err, "pod_sandbox_id")
		if _, err := s.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
			t.Errorf("RemoveContainer %s: %v, want an idempotent success", id, err)
		}
		if _, err := s.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Errorf("StopPodSandbox %s: %v, want an idempotent success", id, err)
		}
	}
	if err := exec.Command("docker", "inspect", victim).Run(); err != nil {
		t.Fatalf("the non-Kubernetes container %s is gone: %v", victim, err)
	}
	// A real image still works by name and by ID.
	st, err := s.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: busyboxImage}})
	if err != nil || st.GetImage() == nil {
		t.Fatalf("ImageStatus %s: %v %v", busyboxImage, st, err)
	}
	if st, err := s.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: st.Image.Id}}); err != nil || st.GetImage() == nil {
		t.Fatalf("ImageStatus by ID: %v %v", st, err)
	}
}

// A container's log path cannot leave its sandbox's log directory: a
// CreateContainer with log_path "../../x.log" used to write outside it.
func TestIntegrationLogPathConfined(t *testing.T) {
	e := newEnv(t, true)
	s := startShim(t, e)
	ctx := ctxT(t)
	cfg := s.sandboxConfig("logs")
	cfg.LogDirectory = filepath.Join(e.logDir, "ns_logs_uid")
	sbID := s.runSandbox(cfg)
	escape := "escape-" + e.runID + ".log"
	for _, p := range []string{"../../" + escape, filepath.Join(e.logDir, escape)} {
		c := containerConfig("esc", "echo", "hello")
		c.LogPath = p
		_, err := s.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sbID, Config: c, SandboxConfig: cfg})
		wantInvalid(t, "CreateContainer log_path "+p, err, "config.log_path")
	}
	for _, p := range []string{filepath.Join(filepath.Dir(e.logDir), escape), filepath.Join(e.logDir, escape)} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("a log file was written outside the sandbox's log directory: %s", p)
		}
	}

	// The log directory is the one the sandbox was run with: a
	// CreateContainer naming another one is refused.
	other := proto.Clone(cfg).(*runtimeapi.PodSandboxConfig)
	other.LogDirectory = filepath.Join(e.logDir, "elsewhere")
	c := containerConfig("other", "echo", "hello")
	_, err := s.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sbID, Config: c, SandboxConfig: other})
	wantInvalid(t, "CreateContainer with another log_directory", err, "sandbox_config.log_directory")
	bad := s.sandboxConfig("logs-rel")
	bad.LogDirectory = "relative/dir"
	_, err = s.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: bad})
	wantInvalid(t, "RunPodSandbox with a relative log_directory", err, "config.log_directory")

	// A directory of the log path swapped for a symbolic link to elsewhere
	// (by a pod that can write the log directory) does not lead the log file
	// there.
	outside := filepath.Join(filepath.Dir(e.logDir), "outside-"+e.runID)
	for _, d := range []string{outside, cfg.LogDirectory} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(cfg.LogDirectory, "linked")); err != nil {
		t.Fatal(err)
	}
	c = containerConfig("linked", "echo", "hello")
	c.LogPath = "linked/0.log"
	resp, err := s.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sbID, Config: c, SandboxConfig: cfg})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if _, err := s.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: resp.ContainerId}); err == nil {
		t.Errorf("StartContainer with a log path through a symbolic link out of the log directory succeeded")
	}
	if entries, _ := os.ReadDir(outside); len(entries) > 0 {
		t.Errorf("a log file was created through the symbolic link: %v", entries)
	}
}

// DNS servers, searches and options become resolv.conf lines: a newline in
// one used to add lines of the client's choosing.
func TestIntegrationDNSInjection(t *testing.T) {
	e := newEnv(t, true)
	s := startShim(t, e)
	ctx := ctxT(t)
	for _, tc := range []struct {
		field string
		dns   *runtimeapi.DNSConfig
	}{
		{"dns_config.servers", &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10\nnameserver 6.6.6.6"}}},
		{"dns_config.searches", &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10"}, Searches: []string{"svc.local\nnameserver 6.6.6.6"}}},
		{"dns_config.options", &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10"}, Options: []string{"ndots:5 rotate"}}},
	} {
		cfg := s.sandboxConfig("dns")
		cfg.DnsConfig = tc.dns
		resp, err := s.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
		if err == nil {
			removeSandboxDirect(resp.PodSandboxId)
		}
		wantInvalid(t, "RunPodSandbox "+tc.field, err, tc.field)
	}
}

// Every RPC with an empty request (nil sub-messages) answers with a status
// (InvalidArgument, NotFound, Unimplemented or OK), never a panic, and the
// server keeps serving.
func TestIntegrationEmptyRequests(t *testing.T) {
	e := newEnv(t, true)
	s := startShim(t, e)
	ctx := ctxT(t)
	rt, img := s.rt, s.img
	calls := map[string]func() error{
		"RunPodSandbox":    func() error { _, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{}); return err },
		"StopPodSandbox":   func() error { _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{}); return err },
		"RemovePodSandbox": func() error { _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{}); return err },
		"PodSandboxStatus": func() error { _, err := rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{}); return err },
		"ListPodSandbox":   func() error { _, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); return err },
		"CreateContainer":  func() error { _, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{}); return err },
		"CreateContainerNoLinux": func() error {
			_, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: "ffffffffffff",
				Config:        &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: busyboxImage}},
				SandboxConfig: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p"}}})
			return err
		},
		"StartContainer":  func() error { _, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{}); return err },
		"StopContainer":   func() error { _, err := rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{}); return err },
		"RemoveContainer": func() error { _, err := rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{}); return err },
		"ListContainers":  func() error { _, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); return err },
		"ContainerStatus": func() error { _, err := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{}); return err },
		"UpdateResources": func() error {
			_, err := rt.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{})
			return err
		},
		"ReopenLog": func() error {
			_, err := rt.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{})
			return err
		},
		"ExecSync":       func() error { _, err := rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{}); return err },
		"Exec":           func() error { _, err := rt.Exec(ctx, &runtimeapi.ExecRequest{}); return err },
		"Attach":         func() error { _, err := rt.Attach(ctx, &runtimeapi.AttachRequest{}); return err },
		"PortForward":    func() error { _, err := rt.PortForward(ctx, &runtimeapi.PortForwardRequest{}); return err },
		"ContainerStats": func() error { _, err := rt.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{}); return err },
		"ListStats": func() error {
			_, err := rt.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{})
			return err
		},
		"PodSandboxStats": func() error { _, err := rt.PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{}); return err },
		"ListSandboxStats": func() error {
			_, err := rt.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{})
			return err
		},
		"UpdateRuntimeConfig": func() error {
			_, err := rt.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{})
			return err
		},
		"Status": func() error { _, err := rt.Status(ctx, &runtimeapi.StatusRequest{}); return err },
		"Checkpoint": func() error {
			_, err := rt.CheckpointContainer(ctx, &runtimeapi.CheckpointContainerRequest{})
			return err
		},
		"RuntimeConfig": func() error { _, err := rt.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{}); return err },
		"ListImages":    func() error { _, err := img.ListImages(ctx, &runtimeapi.ListImagesRequest{}); return err },
		"ImageStatus":   func() error { _, err := img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{}); return err },
		"PullImage":     func() error { _, err := img.PullImage(ctx, &runtimeapi.PullImageRequest{}); return err },
		"RemoveImage":   func() error { _, err := img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{}); return err },
		"ImageFsInfo":   func() error { _, err := img.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{}); return err },
	}
	allowed := map[codes.Code]bool{codes.OK: true, codes.InvalidArgument: true, codes.NotFound: true, codes.Unimplemented: true}
	for name, call := range calls {
		if err := call(); !allowed[status.Code(err)] {
			t.Errorf("%s with an empty request: %v", name, err)
		}
	}
	if _, err := rt.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		t.Fatalf("the server stopped answering: %v", err)
	}
}

// A container joins the PID namespace of a target only when the target is a
// container of its own sandbox (Docker would join any container's).
func TestIntegrationPIDTargetSamePod(t *testing.T) {
	e := newEnv(t, true)
	s := startShim(t, e)
	ctx := ctxT(t)
	cfgA, cfgB := s.sandboxConfig("pida"), s.sandboxConfig("pidb")
	sbA, sbB := s.runSandbox(cfgA), s.runSandbox(cfgB)
	target := s.createStart(sbA, cfgA, containerConfig("target", "sleep", "60"))
	out, err := exec.Command("docker", "create", "--label", testLabel+"="+e.runID, busyboxImage, "sleep", "60").Output()
	if err != nil {
		t.Fatalf("docker create: %v", err)
	}
	outsider := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", outsider).Run() })
	debug := func(name, targetID string) *runtimeapi.ContainerConfig {
		c := containerConfig(name, "sleep", "60")
		c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: targetID}}}
		return c
	}
	const field = "namespace_options.target_id"
	_, err = s.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sbB, Config: debug("other", target), SandboxConfig: cfgB})
	wantInvalid(t, "target in another sandbox", err, field)
	_, err = s.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sbA, Config: debug("outsider", outsider), SandboxConfig: cfgA})
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), field) {
		t.Errorf("target outside Kubernetes: got %v, want NotFound naming %s", err, field)
	}
	_, err = s.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sbA, Config: debug("bad", "../"+target), SandboxConfig: cfgA})
	wantInvalid(t, "target that is not an ID", err, field)
	if _, err := s.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sbA, Config: debug("same", target), SandboxConfig: cfgA}); err != nil {
		t.Errorf("target in the same sandbox: %v", err)
	}
}

// A Localhost seccomp profile is the host path the CRI names, anywhere (the
// profile root of earlier versions made critest's profiles under /tmp
// InvalidArgument); only what is not a clean absolute path to a regular file
// is refused.
func TestIntegrationSeccompProfilePaths(t *testing.T) {
	e := newEnv(t, true)
	s := startShim(t, e)
	ctx := ctxT(t)
	dir := filepath.Join(filepath.Dir(e.root), "profiles")
	if err := os.MkdirAll(filepath.Join(dir, "dir.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	allow := filepath.Join(dir, "allow.json")
	if err := os.WriteFile(allow, []byte(`{"defaultAction":"SCMP_ACT_ALLOW"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	localhost := func(ref string) *runtimeapi.SecurityProfile {
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: ref}
	}
	sbCfg := s.sandboxConfig("seccomp")
	sbID := s.runSandbox(sbCfg)
	for _, ref := range []string{"allow.json", dir + "/../profiles/allow.json", filepath.Join(dir, "dir.json"), filepath.Join(dir, "fifo.json")} {
		c := containerConfig("sc", "true")
		c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{Seccomp: localhost(ref)}}
		_, err := s.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sbID, Config: c, SandboxConfig: sbCfg})
		wantInvalid(t, "CreateContainer seccomp "+ref, err, "config.linux.security_context.seccomp.localhost_ref")
	}
	bad := s.sandboxConfig("seccomp-sb")
	bad.Linux.SecurityContext = &runtimeapi.LinuxSandboxSecurityContext{Seccomp: localhost("allow.json")}
	_, err := s.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: bad})
	wantInvalid(t, "RunPodSandbox relative seccomp profile", err, "config.linux.security_context.seccomp.localhost_ref")

	// A profile outside the kubelet's <root-dir>/seccomp is applied, in both forms.
	for i, sc := range []*runtimeapi.LinuxContainerSecurityContext{{Seccomp: localhost(allow)}, {SeccompProfilePath: "localhost/" + allow}} {
		c := containerConfig(fmt.Sprintf("sc%d", i), "true")
		c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: sc}
		if _, err := s.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sbID, Config: c, SandboxConfig: sbCfg}); err != nil {
			t.Errorf("CreateContainer with the profile %s (%v): %v", allow, sc, err)
		}
	}
}

// Host paths with ':' or ',' cannot be carried by Docker's bind string (the
// container used to fail to be created, or to mount the wrong path): they go
// through the Mounts API, a missing source created first.
func TestIntegrationMountPathsWithSeparators(t *testing.T) {
	e := newEnv(t, true)
	s := startShim(t, e)
	base := filepath.Join(filepath.Dir(e.root), "vol:a,b")
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "f"), []byte("from-colon-dir\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(filepath.Dir(e.root), "new:dir")
	sbCfg := s.sandboxConfig("mounts")
	sbID := s.runSandbox(sbCfg)
	c := containerConfig("m", "sh", "-c", "cat /data/f && touch /out/written")
	c.Mounts = []*runtimeapi.Mount{
		{HostPath: base, ContainerPath: "/data", Readonly: true},
		{HostPath: missing, ContainerPath: "/out"},
	}
	id := s.createStart(sbID, sbCfg, c)
	if st := s.waitState(id, runtimeapi.ContainerState_CONTAINER_EXITED); st.ExitCode != 0 {
		t.Fatalf("container exited %d (%s)", st.ExitCode, st.Message)
	}
	if _, err := os.Stat(filepath.Join(missing, "written")); err != nil {
		t.Errorf("the missing mount source was not created and mounted: %v", err)
	}
	logs, err := readFile(filepath.Join(sbCfg.LogDirectory, "m.log"))
	if err != nil || !strings.Contains(logs, "from-colon-dir") {
		t.Errorf("container log %q (%v): the host directory with ':' was not mounted", logs, err)
	}
}
