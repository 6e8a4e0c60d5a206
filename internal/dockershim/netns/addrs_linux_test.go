package netns

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestGlobalAddrs reads a veth eth0's global addresses in a namespace of
// its own; the link-local IPv6 address and loopback are not reported.
func TestGlobalAddrs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root (unshare -n): run the suite as root")
	}
	cmd := exec.Command("unshare", "-n", "sh", "-c",
		"ip link add eth0 type veth peer name eth1 && ip addr add fd00:5::7/64 dev eth0 && ip addr add 10.250.3.4/24 dev eth0 && "+
			"ip addr add fe80::1234/64 dev eth0 && ip link set lo up && exec sleep 60")
	if err := cmd.Start(); err != nil {
		t.Fatalf("unshare: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ns := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/net"
	want := []string{"10.250.3.4", "fd00:5::7"}
	var got []string
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got, err = GlobalAddrs(ns, "eth0"); err == nil && slices.Equal(got, want) {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("GlobalAddrs = %v, %v; want %v", got, err, want)
	}
	if _, err := GlobalAddrs(ns, "eth9"); err == nil {
		t.Error("a missing interface gave no error")
	}
	if _, err := GlobalAddrs("/proc/0/ns/net", "eth0"); err == nil {
		t.Error("a missing namespace gave no error")
	}
	// The calling thread came back: this process's own eth0 (if any) is not
	// the pod's.
	if own, _ := interfaceAddrs("eth0"); slices.Contains(own, "10.250.3.4") {
		t.Error("the thread stayed in the pod's namespace")
	}
}
