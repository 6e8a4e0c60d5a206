//go:build linux

package dockershim_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/dockerd"
)

// TestIntegrationCDIDevicesDocker26 (issue 30 item 8): a container's CDI
// devices reach a Docker Engine 26 with CDI on (features.cdi and a spec
// directory of the test) as a device request of driver "cdi", and the engine
// applies the spec's edits (an environment variable the container prints).
// A malformed device name is InvalidArgument naming the field; an engine
// without CDI (the suite's, without the feature) refuses the devices with
// InvalidArgument saying so.
func TestIntegrationCDIDevicesDocker26(t *testing.T) {
	specs := t.TempDir()
	if err := os.WriteFile(filepath.Join(specs, "test.yaml"), []byte(`cdiVersion: "0.6.0"
kind: "example.com/test"
devices:
- name: dev0
  containerEdits:
    env: ["CDI_DEVICE=dev0-applied"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	d := dockerd.Start(t, dockerd.Options{Images: []string{pauseImage, busyboxImage}, Engine: dockerd.Docker26, CDISpecDirs: []string{specs}})
	s := startShimOn(t, newEnv(t, true), d.Endpoint)
	sbCfg := s.sandboxConfig("cdi")
	sbID := s.runSandbox(sbCfg)

	cfg := containerConfig("gpu", "sh", "-c", "echo device=$CDI_DEVICE; sleep 30")
	cfg.CDIDevices = []*runtimeapi.CDIDevice{{Name: "example.com/test=dev0"}}
	s.createStart(sbID, sbCfg, cfg)
	logPath := filepath.Join(sbCfg.LogDirectory, cfg.LogPath)
	deadline := time.Now().Add(30 * time.Second)
	for {
		log, _ := readFile(logPath)
		if strings.Contains(log, "device=dev0-applied") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("container log %q: the CDI spec's edit was not applied", log)
		}
		time.Sleep(200 * time.Millisecond)
	}

	bad := containerConfig("bad", "true")
	bad.CDIDevices = []*runtimeapi.CDIDevice{{Name: "example.com/test=dev0"}, {Name: "no-kind"}}
	_, err := s.rt.CreateContainer(ctxT(t), &runtimeapi.CreateContainerRequest{PodSandboxId: sbID, Config: bad, SandboxConfig: sbCfg})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "config.cdi_devices[1].name") {
		t.Errorf("malformed CDI name: %v, want InvalidArgument naming config.cdi_devices[1].name", err)
	}
}

// TestIntegrationCDIDevicesRefused: on an engine without CDI the devices are
// refused with InvalidArgument, not dropped.
func TestIntegrationCDIDevicesRefused(t *testing.T) {
	s := startShim(t, newEnv(t, true))
	sbCfg := s.sandboxConfig("nocdi")
	sbID := s.runSandbox(sbCfg)
	cfg := containerConfig("gpu", "true")
	cfg.CDIDevices = []*runtimeapi.CDIDevice{{Name: "example.com/test=dev0"}}
	_, err := s.rt.CreateContainer(ctxT(t), &runtimeapi.CreateContainerRequest{PodSandboxId: sbID, Config: cfg, SandboxConfig: sbCfg})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "has no CDI") {
		t.Errorf("CDI device on an engine without CDI: %v, want InvalidArgument saying it has no CDI", err)
	}
}
