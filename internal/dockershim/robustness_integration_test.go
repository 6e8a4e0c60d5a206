//go:build linux

package dockershim_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A shim restart keeps sandboxes, IPs, containers and logs, and teardown still works.
func TestIntegrationShimRestart(t *testing.T) {
	e := newEnv(t, true)
	s := startShim(t, e)
	ctx := ctxT(t)
	sbCfg := s.sandboxConfig("restart")
	sbID := s.runSandbox(sbCfg)
	st, err := s.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sbID})
	if err != nil {
		t.Fatal(err)
	}
	ip := st.Status.Network.Ip
	id := s.createStart(sbID, sbCfg, containerConfig("ticker", "sh", "-c", "i=0; while [ $i -lt 60 ]; do echo line-$i; i=$((i+1)); sleep 0.05; done; sleep 300"))
	logPath := filepath.Join(sbCfg.LogDirectory, "ticker.log")
	waitFor(t, func() bool { return len(readCRILogQuiet(logPath)) >= 5 })

	s.stop() // lines keep coming while the shim is down
	time.Sleep(time.Second)
	s2 := startShim(t, e)
	st2, err := s2.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sbID})
	if err != nil {
		t.Fatal(err)
	}
	if st2.Status.Network.Ip != ip || st2.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("after restart: ip %q state %v, want %q READY", st2.Status.Network.Ip, st2.Status.State, ip)
	}
	cs, err := s2.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil || cs.Status.State != runtimeapi.ContainerState_CONTAINER_RUNNING || cs.Status.Metadata.Name != "ticker" {
		t.Fatalf("container after restart: %+v %v", cs.GetStatus(), err)
	}
	waitFor(t, func() bool { return len(readCRILogQuiet(logPath)) >= 60 })
	lines := readCRILog(t, logPath)
	for i, l := range lines {
		if want := "line-" + strconv.Itoa(i); l.text != want {
			t.Fatalf("log line %d = %q, want %q (lost or duplicated across restart)", i, l.text, want)
		}
	}
	if _, err := s2.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sbID}); err != nil {
		t.Fatal(err)
	}
	if got := e.reservedIPs(t); len(got) != 0 {
		t.Fatalf("IP leaked after restart+stop: %v", got)
	}
}

// A second shim on the same Docker (another root directory) leaves the first
// one's containers alone: it used to resume their log copying too, so every
// line reached the log file twice.
func TestIntegrationSecondShimLeavesLogsAlone(t *testing.T) {
	e := newEnv(t, true)
	s := startShim(t, e)
	sbCfg := s.sandboxConfig("first")
	sbID := s.runSandbox(sbCfg)
	s.createStart(sbID, sbCfg, containerConfig("ticker", "sh", "-c", "i=0; while [ $i -lt 60 ]; do echo line-$i; i=$((i+1)); sleep 0.05; done; sleep 300"))
	logPath := filepath.Join(sbCfg.LogDirectory, "ticker.log")
	waitFor(t, func() bool { return len(readCRILogQuiet(logPath)) >= 5 })

	startShim(t, newEnv(t, true))
	waitFor(t, func() bool { return len(readCRILogQuiet(logPath)) >= 60 })
	time.Sleep(500 * time.Millisecond)
	lines := readCRILog(t, logPath)
	for i, l := range lines {
		if want := "line-" + strconv.Itoa(i); l.text != want {
			t.Fatalf("log line %d = %q, want %q (a second shim copied the first one's container)", i, l.text, want)
		}
	}
	if len(lines) != 60 {
		t.Fatalf("%d log lines, want 60", len(lines))
	}
}

// A failed CNI ADD leaves no IP, no container and no checkpoint behind.
func TestIntegrationFailedRunLeaksNothing(t *testing.T) {
	e := newEnv(t, false)
	e.writeConf(t, `{"type":"tuning","sysctl":{"net.ipv4.conf.eth0.does_not_exist":"1"}}`)
	s := startShim(t, e)
	ctx := ctxT(t)
	cfg := s.sandboxConfig("failing")
	_, err := s.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err == nil {
		t.Fatal("RunPodSandbox succeeded with a failing CNI plugin")
	}
	if got := e.reservedIPs(t); len(got) != 0 {
		t.Fatalf("IP leaked after failed run: %v", got)
	}
	l, err := s.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{testLabel: e.runID}}})
	if err != nil || len(l.Items) != 0 {
		t.Fatalf("sandboxes left after failed run: %v %v", l.GetItems(), err)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.root, "sandbox")); len(ents) != 0 {
		t.Fatalf("checkpoints left after failed run: %v", ents)
	}
}

// A corrupt checkpoint is treated as missing and never blocks stop and remove.
func TestIntegrationCorruptCheckpoint(t *testing.T) {
	e := newEnv(t, true)
	s := startShim(t, e)
	ctx := ctxT(t)
	id := s.runSandbox(s.sandboxConfig("corrupt"))
	path := filepath.Join(e.root, "sandbox", id)
	if err := os.WriteFile(path, []byte(`{"version":"v1","data":{`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id}); err != nil {
		t.Fatalf("status with corrupt checkpoint: %v", err)
	}
	if _, err := s.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatalf("stop with corrupt checkpoint: %v", err)
	}
	if _, err := s.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatalf("remove with corrupt checkpoint: %v", err)
	}
}

// A sandbox whose container was removed behind the shim's back is listed NOTREADY
// from its checkpoint, and stopping it tears the network down from the CNI cache.
func TestIntegrationTeardownAfterContainerGone(t *testing.T) {
	e := newEnv(t, true)
	s := startShim(t, e)
	ctx := ctxT(t)
	id := s.runSandbox(s.sandboxConfig("gone"))
	removeSandboxDirect(id)
	l, err := s.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{Id: id}})
	if err != nil || len(l.Items) != 1 || l.Items[0].State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("orphan listing: %+v %v", l.GetItems(), err)
	}
	if _, err := s.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
	if got := e.reservedIPs(t); len(got) != 0 {
		t.Fatalf("IP leaked: %v", got)
	}
	if _, err := s.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
}

func TestIntegrationBadInput(t *testing.T) {
	e := newEnv(t, true)
	s := startShim(t, e)
	ctx := ctxT(t)
	good := s.sandboxConfig("bad")
	sbID := s.runSandbox(good)
	noMeta := s.sandboxConfig("x")
	noMeta.Metadata = nil
	badName := s.sandboxConfig("x")
	badName.Metadata.Name = "has/slash"
	userns := s.sandboxConfig("userns")
	userns.Linux.SecurityContext = &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{
		UsernsOptions: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD}}}
	imgMount := containerConfig("imgvol", "true")
	imgMount.Mounts = []*runtimeapi.Mount{{ContainerPath: "/data", Image: &runtimeapi.ImageSpec{Image: busyboxImage}}}
	rro := containerConfig("rro", "true")
	rro.Mounts = []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: t.TempDir(), Readonly: true, RecursiveReadOnly: true}}
	noImage := containerConfig("noimage", "true")
	noImage.Image = &runtimeapi.ImageSpec{Image: "kubelet-dockershim/does-not-exist:1"}

	for _, c := range []struct {
		desc  string
		call  func() error
		code  codes.Code
		field string
	}{
		{"run: no config", func() error { _, err := s.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{}); return err }, codes.InvalidArgument, "config"},
		{"run: no metadata", func() error {
			_, err := s.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: noMeta})
			return err
		}, codes.InvalidArgument, "config.metadata"},
		{"run: bad name", func() error {
			_, err := s.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: badName})
			return err
		}, codes.InvalidArgument, "config.metadata.name"},
		{"run: unknown handler", func() error {
			_, err := s.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: s.sandboxConfig("h"), RuntimeHandler: "nope"})
			return err
		}, codes.InvalidArgument, "runtime_handler"},
		{"run: user namespaces", func() error {
			_, err := s.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: userns})
			return err
		}, codes.Unimplemented, "user namespaces"},
		{"status: empty id", func() error {
			_, err := s.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{})
			return err
		}, codes.InvalidArgument, "pod_sandbox_id"},
		{"status: unknown id", func() error {
			_, err := s.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: "ffffffffffff"})
			return err
		}, codes.NotFound, "pod_sandbox_id"},
		{"create: unknown sandbox", func() error {
			_, err := s.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: "ffffffffffff", Config: containerConfig("c", "true"), SandboxConfig: good})
			return err
		}, codes.NotFound, "pod_sandbox_id"},
		{"create: no image", func() error {
			c := containerConfig("c", "true")
			c.Image = nil
			_, err := s.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sbID, Config: c, SandboxConfig: good})
			return err
		}, codes.InvalidArgument, "config.image.image"},
		{"create: missing image", func() error {
			_, err := s.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sbID, Config: noImage, SandboxConfig: good})
			return err
		}, codes.NotFound, "config.image.image"},
		{"create: image volume", func() error {
			_, err := s.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sbID, Config: imgMount, SandboxConfig: good})
			return err
		}, codes.Unimplemented, "image volumes"},
		{"create: recursive read-only", func() error {
			_, err := s.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sbID, Config: rro, SandboxConfig: good})
			return err
		}, codes.Unimplemented, "recursive read-only"},
		{"container status: unknown", func() error {
			_, err := s.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: "ffffffffffff"})
			return err
		}, codes.NotFound, "container_id"},
		{"start: sandbox id as container", func() error {
			_, err := s.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: sbID})
			return err
		}, codes.NotFound, "container_id"},
		{"checkpoint", func() error {
			_, err := s.rt.CheckpointContainer(ctx, &runtimeapi.CheckpointContainerRequest{ContainerId: "ffffffffffff"})
			return err
		}, codes.Unimplemented, "CRIU"},
	} {
		t.Run(c.desc, func(t *testing.T) {
			err := c.call()
			if status.Code(err) != c.code || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("got %v, want code %s naming %q", err, c.code, c.field)
			}
		})
	}
}
