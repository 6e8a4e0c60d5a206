//go:build linux

package dockershim_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestIntegrationVersionAndStatus(t *testing.T) {
	e := newEnv(t, false)
	s := startShim(t, e)
	ctx := ctxT(t)
	v, err := s.rt.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if v.RuntimeName != "docker" || v.RuntimeApiVersion != "v1" || v.RuntimeVersion == "" {
		t.Fatalf("Version = %+v", v)
	}
	st, err := s.rt.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	conds := map[string]*runtimeapi.RuntimeCondition{}
	for _, c := range st.Status.Conditions {
		conds[c.Type] = c
	}
	if !conds[runtimeapi.RuntimeReady].Status {
		t.Fatalf("RuntimeReady false: %+v", conds[runtimeapi.RuntimeReady])
	}
	if nr := conds[runtimeapi.NetworkReady]; nr.Status || nr.Reason == "" {
		t.Fatalf("NetworkReady without CNI config = %+v, want false with a reason", nr)
	}
	if len(st.RuntimeHandlers) < 2 {
		t.Fatalf("runtime handlers = %v, want default and runc", st.RuntimeHandlers)
	}
	e.writeConf(t, "")
	st, err = s.rt.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.Status.Conditions {
		if !c.Status {
			t.Fatalf("condition %s false after CNI config written: %+v", c.Type, c)
		}
	}
	rc, err := s.rt.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := dockerCgroupDriver(t)
	if got := strings.ToLower(rc.Linux.CgroupDriver.String()); got != want {
		t.Fatalf("RuntimeConfig cgroup driver %s, docker says %s", got, want)
	}
	if _, err := s.rt.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: "10.9.0.0/24"}}}); err != nil {
		t.Fatal(err)
	}
}

func dockerCgroupDriver(t *testing.T) string {
	out, err := exec.Command("docker", "info", "--format", "{{.CgroupDriver}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

func TestIntegrationSandboxLifecycle(t *testing.T) {
	e := newEnv(t, true)
	s := startShim(t, e)
	ctx := ctxT(t)
	cfg := s.sandboxConfig("lifecycle")
	cfg.DnsConfig = &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"svc.cluster.local"}, Options: []string{"ndots:5"}}
	cfg.PortMappings = []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: 0}}
	id := s.runSandbox(cfg)

	st, err := s.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id[:12], Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.Id != id || st.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("status = %+v", st.Status)
	}
	if !strings.HasPrefix(st.Status.Network.Ip, e.subnetPrefix+".") {
		t.Fatalf("pod IP %q not in %s.0/24", st.Status.Network.Ip, e.subnetPrefix)
	}
	if got := e.reservedIPs(t); len(got) != 1 || got[0] != st.Status.Network.Ip {
		t.Fatalf("host-local holds %v, want [%s]", got, st.Status.Network.Ip)
	}
	if st.Status.Metadata.Name != "lifecycle" || st.Status.Labels[testLabel] != e.runID || st.Status.Annotations["note"] != "integration" {
		t.Fatalf("metadata/labels/annotations lost: %+v", st.Status)
	}
	if st.Info["info"] == "" {
		t.Fatal("verbose status has no info")
	}
	// The pod's resolv.conf is the CRI DNS config.
	out, err := exec.Command("docker", "inspect", "-f", "{{.ResolvConfPath}}", id).Output()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := os.ReadFile(strings.TrimSpace(string(out)))
	if err != nil || !strings.Contains(string(rc), "nameserver 10.96.0.10") || !strings.Contains(string(rc), "options ndots:5") {
		t.Fatalf("resolv.conf = %q, %v", rc, err)
	}
	// Docker name follows the legacy convention.
	name, _ := exec.Command("docker", "inspect", "-f", "{{.Name}}", id).Output()
	if want := "/k8s_POD_lifecycle_" + cfg.Metadata.Namespace + "_" + cfg.Metadata.Uid + "_0"; strings.TrimSpace(string(name)) != want {
		t.Fatalf("docker name %q, want %q", name, want)
	}

	list := func(f *runtimeapi.PodSandboxFilter) int {
		r, err := s.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		return len(r.Items)
	}
	ready := &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}
	notReady := &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}
	sel := map[string]string{testLabel: e.runID}
	for _, c := range []struct {
		desc string
		f    *runtimeapi.PodSandboxFilter
		want int
	}{
		{"by label", &runtimeapi.PodSandboxFilter{LabelSelector: sel}, 1},
		{"by id prefix", &runtimeapi.PodSandboxFilter{Id: id[:10]}, 1},
		{"ready", &runtimeapi.PodSandboxFilter{State: ready, LabelSelector: sel}, 1},
		{"not ready", &runtimeapi.PodSandboxFilter{State: notReady, LabelSelector: sel}, 0},
		{"other label", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{testLabel: "nope"}}, 0},
	} {
		if got := list(c.f); got != c.want {
			t.Errorf("%s: %d sandboxes, want %d", c.desc, got, c.want)
		}
	}

	// Stop with the short ID: CNI gets the full ID and the IP is released.
	if _, err := s.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id[:12]}); err != nil {
		t.Fatal(err)
	}
	if got := e.reservedIPs(t); len(got) != 0 {
		t.Fatalf("IPs still reserved after stop: %v", got)
	}
	if got := list(&runtimeapi.PodSandboxFilter{State: notReady, LabelSelector: sel}); got != 1 {
		t.Fatalf("%d not-ready sandboxes after stop, want 1", got)
	}
	for i := 0; i < 2; i++ { // idempotent
		if _, err := s.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Fatalf("second stop: %v", err)
		}
		if _, err := s.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Fatalf("remove %d: %v", i, err)
		}
	}
	if _, err := s.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id}); status.Code(err) != codes.NotFound {
		t.Fatalf("status after remove: %v, want NotFound", err)
	}
	if _, err := os.Stat(filepath.Join(e.root, "sandbox", id)); !os.IsNotExist(err) {
		t.Fatalf("checkpoint left after remove: %v", err)
	}
}

func TestIntegrationContainerLifecycleAndLogs(t *testing.T) {
	e := newEnv(t, true)
	s := startShim(t, e)
	ctx := ctxT(t)
	sbCfg := s.sandboxConfig("ctrs")
	sbID := s.runSandbox(sbCfg)

	cfg := containerConfig("printer", "sh", "-c", "echo out-1; echo err-1 >&2; echo out-2; exit 3")
	cfg.Envs = []*runtimeapi.KeyValue{{Key: "GREETING", Value: []byte("hello")}}
	userImage := "docker.io/" + busyboxImage // as a pod spec may name it
	cfg.Image.UserSpecifiedImage = userImage
	id := s.createStart(sbID, sbCfg, cfg)
	if _, err := os.Stat(filepath.Join(sbCfg.LogDirectory, "printer.log")); err != nil {
		t.Fatalf("log file must exist once StartContainer returns: %v", err)
	}
	st := s.waitState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
	if st.ExitCode != 3 || st.Reason != "Error" || st.StartedAt == 0 || st.FinishedAt < st.StartedAt || st.CreatedAt == 0 {
		t.Fatalf("exited status = %+v", st)
	}
	if len(st.Labels) != 1 || st.Labels["container"] != "printer" {
		t.Fatalf("labels = %v, want only the client's (none copied from the image)", st.Labels)
	}
	// As the 1.23 dockershim and cri-dockerd: the image's first tag, a
	// docker:// (or, with a repo digest, docker-pullable://) ref, its ID.
	img, err := s.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: busyboxImage}})
	if err != nil || img.Image == nil {
		t.Fatalf("ImageStatus: %v %v", img, err)
	}
	wantRef := "docker://" + img.Image.Id
	if len(img.Image.RepoDigests) > 0 {
		wantRef = "docker-pullable://" + img.Image.RepoDigests[0]
	}
	if st.ImageRef != wantRef || st.ImageId != img.Image.Id || len(img.Image.RepoTags) == 0 || st.Image.GetImage() != img.Image.RepoTags[0] {
		t.Fatalf("image %q ref %q id %q; want %v[0], %q, %q", st.Image.GetImage(), st.ImageRef, st.ImageId, img.Image.RepoTags, wantRef, img.Image.Id)
	}
	if st.Image.GetUserSpecifiedImage() != userImage {
		t.Fatalf("user specified image %q, want %q", st.Image.GetUserSpecifiedImage(), userImage)
	}
	wantLog := filepath.Join(sbCfg.LogDirectory, "printer.log")
	if st.LogPath != wantLog {
		t.Fatalf("log path %q, want %q", st.LogPath, wantLog)
	}
	lines := readCRILog(t, wantLog)
	var stdout, stderr []string
	for _, l := range lines {
		if l.stream == "stdout" {
			stdout = append(stdout, l.text)
		} else {
			stderr = append(stderr, l.text)
		}
	}
	if strings.Join(stdout, ",") != "out-1,out-2" || strings.Join(stderr, ",") != "err-1" {
		t.Fatalf("CRI log lines = %+v", lines)
	}
	if fi, err := os.Lstat(wantLog); err != nil || fi.Mode()&os.ModeSymlink != 0 {
		t.Fatalf("log path must be a regular file: %v %v", fi, err)
	}

	ok := s.createStart(sbID, sbCfg, containerConfig("ok", "true"))
	if st := s.waitState(ok, runtimeapi.ContainerState_CONTAINER_EXITED); st.Reason != "Completed" || st.ExitCode != 0 {
		t.Fatalf("ok status = %+v", st)
	}

	oomCfg := containerConfig("oom", "sh", "-c", "head -c 200m /dev/zero | tail")
	oomCfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 16 << 20}}
	oom := s.createStart(sbID, sbCfg, oomCfg)
	if st := s.waitState(oom, runtimeapi.ContainerState_CONTAINER_EXITED); st.Reason != "OOMKilled" {
		t.Fatalf("oom status = %+v", st)
	}

	run := s.createStart(sbID, sbCfg, containerConfig("sleeper", "sleep", "300"))
	s.waitState(run, runtimeapi.ContainerState_CONTAINER_RUNNING)
	lr, err := s.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: sbID}})
	if err != nil || len(lr.Containers) != 4 {
		t.Fatalf("ListContainers by sandbox: %d, %v", len(lr.GetContainers()), err)
	}
	lr, err = s.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}, LabelSelector: map[string]string{"container": "sleeper"}}})
	if err != nil || len(lr.Containers) != 1 || lr.Containers[0].Id != run {
		t.Fatalf("ListContainers running+label: %+v, %v", lr.GetContainers(), err)
	}
	if _, err := s.rt.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: run,
		Linux: &runtimeapi.LinuxContainerResources{CpuShares: 512, MemoryLimitInBytes: 64 << 20}}); err != nil {
		t.Fatal(err)
	}
	if st := s.waitState(run, runtimeapi.ContainerState_CONTAINER_RUNNING); st.Resources.Linux.MemoryLimitInBytes != 64<<20 || st.Resources.Linux.CpuShares != 512 {
		t.Fatalf("resources after update = %+v", st.Resources.Linux)
	}
	start := time.Now()
	if _, err := s.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: run, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("stop with 1s grace took %s", d)
	}
	for _, c := range []string{run, run, "0000000000000000000000000000000000000000000000000000000000000000"} {
		if _, err := s.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c}); err != nil {
			t.Fatalf("idempotent stop: %v", err)
		}
		if _, err := s.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c}); err != nil {
			t.Fatalf("idempotent remove: %v", err)
		}
	}
}

func TestIntegrationReopenContainerLog(t *testing.T) {
	e := newEnv(t, true)
	s := startShim(t, e)
	ctx := ctxT(t)
	sbCfg := s.sandboxConfig("reopen")
	sbID := s.runSandbox(sbCfg)
	id := s.createStart(sbID, sbCfg, containerConfig("ticker", "sh", "-c", "i=0; while true; do echo tick-$i; i=$((i+1)); sleep 0.1; done"))
	logPath := filepath.Join(sbCfg.LogDirectory, "ticker.log")
	waitFor(t, func() bool { return len(readCRILogQuiet(logPath)) >= 3 })
	if err := os.Rename(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.rt.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(readCRILogQuiet(logPath)) >= 3 })
	old, cur := readCRILogQuiet(logPath+".1"), readCRILogQuiet(logPath)
	if old[len(old)-1].text == cur[0].text {
		t.Fatalf("line %q written to both files", cur[0].text)
	}
	if _, err := s.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.rt.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("reopen of stopped container: %v, want FailedPrecondition", err)
	}
}

func TestIntegrationExecSync(t *testing.T) {
	e := newEnv(t, true)
	s := startShim(t, e)
	ctx := ctxT(t)
	sbCfg := s.sandboxConfig("exec")
	sbID := s.runSandbox(sbCfg)
	id := s.createStart(sbID, sbCfg, containerConfig("target", "sleep", "300"))
	s.waitState(id, runtimeapi.ContainerState_CONTAINER_RUNNING)

	r, err := s.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"sh", "-c", "echo hi; echo oops >&2; exit 7"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Stdout) != "hi\n" || string(r.Stderr) != "oops\n" || r.ExitCode != 7 {
		t.Fatalf("ExecSync = %q %q %d", r.Stdout, r.Stderr, r.ExitCode)
	}
	start := time.Now()
	_, err = s.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"sleep", "777"}, Timeout: 1})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("ExecSync timeout: %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("timeout took %s", d)
	}
	waitFor(t, func() bool {
		ps, _ := s.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"ps"}})
		return ps != nil && !bytes.Contains(ps.Stdout, []byte("sleep 777"))
	})
	for _, c := range []struct {
		desc string
		req  *runtimeapi.ExecSyncRequest
		code codes.Code
	}{
		{"empty id", &runtimeapi.ExecSyncRequest{Cmd: []string{"true"}}, codes.InvalidArgument},
		{"unknown id", &runtimeapi.ExecSyncRequest{ContainerId: "deadbeefdeadbeef", Cmd: []string{"true"}}, codes.NotFound},
		{"empty cmd", &runtimeapi.ExecSyncRequest{ContainerId: id}, codes.InvalidArgument},
	} {
		if _, err := s.rt.ExecSync(ctx, c.req); status.Code(err) != c.code {
			t.Errorf("%s: %v, want %s", c.desc, err, c.code)
		}
	}
	for _, req := range []any{
		&runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"sh"}, Stdout: true},
		&runtimeapi.AttachRequest{ContainerId: id, Stdout: true},
		&runtimeapi.PortForwardRequest{PodSandboxId: sbID[:12], Port: []int32{80}},
	} {
		var url string
		switch r := req.(type) {
		case *runtimeapi.ExecRequest:
			resp, err := s.rt.Exec(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			url = resp.Url
		case *runtimeapi.AttachRequest:
			resp, err := s.rt.Attach(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			url = resp.Url
		case *runtimeapi.PortForwardRequest:
			resp, err := s.rt.PortForward(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			url = resp.Url
		}
		if !regexp.MustCompile(`^http://127\.0\.0\.1:\d+/`).MatchString(url) {
			t.Fatalf("streaming URL %q is not absolute on 127.0.0.1", url)
		}
	}
}

// criLine is one parsed CRI log entry.
type criLine struct{ ts, stream, tag, text string }

var criLineRE = regexp.MustCompile(`^(\S+) (stdout|stderr) (F|P) (.*)$`)

func readCRILogQuiet(path string) []criLine {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []criLine
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if m := criLineRE.FindStringSubmatch(l); m != nil {
			if _, err := time.Parse(time.RFC3339Nano, m[1]); err == nil {
				out = append(out, criLine{m[1], m[2], m[3], m[4]})
			}
		}
	}
	return out
}

func readCRILog(t *testing.T, path string) []criLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := readCRILogQuiet(path)
	if n := strings.Count(string(b), "\n"); n != len(lines) {
		t.Fatalf("%d of %d lines of %s are not CRI format: %q", n-len(lines), n, path, b)
	}
	return lines
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 20s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
