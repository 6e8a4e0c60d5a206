//go:build linux

package shim

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestIntegrationInstance starts an instance, runs a sandbox on its network
// (an IP of Subnet, on Bridge) and checks that the end of the (sub)test
// stops the shim, deletes the bridge and removes the dir.
func TestIntegrationInstance(t *testing.T) {
	var bin Binary
	defer func() {
		if err := bin.Remove(); err != nil {
			t.Error(err)
		}
	}()
	var inst *Instance
	t.Run("run a sandbox", func(t *testing.T) {
		inst = bin.Start(t, Options{})
		rt, _ := inst.Dial(t, 30*time.Second)
		ctx, cancel := context.WithTimeout(inst.Context(), time.Minute)
		defer cancel()
		v, err := rt.Version(ctx, "v1")
		if err != nil || v.RuntimeName != "docker" {
			t.Fatalf("Version = %v, %v; want runtime docker", v, err)
		}
		uid := fmt.Sprintf("shim-test-%d-%d", os.Getpid(), time.Now().UnixNano())
		t.Cleanup(func() { RemovePodSandboxes(t, rt, uid) })
		id, err := rt.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "shim-test", Namespace: "shim-test", Uid: uid},
			Labels:   map[string]string{PodUIDLabel: uid},
			Linux:    &runtimeapi.LinuxPodSandboxConfig{},
		}, "")
		if err != nil {
			t.Fatalf("RunPodSandbox: %v", err)
		}
		st, err := rt.PodSandboxStatus(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		if ip := st.GetStatus().GetNetwork().GetIp(); !inst.Subnet.Contains(net.ParseIP(ip)) {
			t.Errorf("sandbox IP %q, want one of %s", ip, inst.Subnet)
		}
		if _, err := net.InterfaceByName(inst.Bridge); err != nil {
			t.Errorf("bridge %s: %v", inst.Bridge, err)
		}
	})
	if inst == nil {
		t.Fatal("no instance")
	}
	if err := inst.Stop(); err != nil {
		t.Errorf("Stop after the test: %v", err)
	}
	if _, err := net.InterfaceByName(inst.Bridge); err == nil {
		t.Errorf("bridge %s still there", inst.Bridge)
	}
	if _, err := os.Stat(inst.Dir); !os.IsNotExist(err) {
		t.Errorf("%s still there (%v)", inst.Dir, err)
	}
}
