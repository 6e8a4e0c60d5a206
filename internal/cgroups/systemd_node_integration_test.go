package cgroups

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/nodecontainer"
)

// insideNodeEnv set to 1 makes TestIntegrationSystemdDriver run its checks:
// it is set in the node container, where the test binary runs itself again.
const insideNodeEnv = "KDS_CGROUPS_INSIDE_NODE"

// TestIntegrationSystemdDriver drives the systemd driver against a real
// systemd (PID 1 of a node container, this host has none) and checks the
// slices where upstream's kubelet has them: each cgroup a slice
// (kubepods-burstable-pod<uid>.slice, '-' in the UID escaped), below systemd's
// own cgroup in every v1 hierarchy (cpuset and hugetlb too), with the limits
// both as unit properties and in the files; an update changes both; Destroy
// stops the slice and removes its directories.
func TestIntegrationSystemdDriver(t *testing.T) {
	if os.Getenv(insideNodeEnv) == "1" {
		checkSystemdDriver(t)
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	n := nodecontainer.Start(t, nodecontainer.Options{Name: "cgsystemd", Binaries: map[string]string{"/usr/local/bin/cgroups.test": self}})
	out, err := n.Exec(t, "env", insideNodeEnv+"=1", "/usr/local/bin/cgroups.test",
		"-test.run", "^TestIntegrationSystemdDriver$", "-test.v", "-test.count=1")
	t.Logf("inside the node:\n%s", out)
	if err != nil || !strings.Contains(out, "--- PASS: TestIntegrationSystemdDriver") {
		t.Fatalf("the driver's checks in the node container failed: %v", err)
	}
}

// checkSystemdDriver runs in the node container.
func checkSystemdDriver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := sddbus.NewWithContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	host := NewHost("/proc")
	mounts, err := host.Mounts()
	if err != nil {
		t.Fatal(err)
	}
	under, err := host.InitCgroup()
	if err != nil {
		t.Fatal(err)
	}
	if under == "/" {
		t.Fatalf("systemd's cgroup is the root: the node container shares nothing of the host's hierarchy here")
	}
	d, err := NewSystemd(mounts, conn, under)
	if err != nil {
		t.Fatal(err)
	}
	root, qos, pod := Name{"kdstest"}, Name{"kdstest", "burstable"}, Name{"kdstest", "burstable", "poda1-b2"}
	for _, n := range []Name{root, qos} {
		if err := d.Create(n, nil); err != nil {
			t.Fatalf("Create(%v): %v", n, err)
		}
	}
	shares, quota, period, mem, pids := uint64(512), int64(50000), uint64(100000), int64(64<<20), int64(100)
	if err := d.Create(pod, &Resources{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period, Memory: &mem, PidsLimit: &pids}); err != nil {
		t.Fatalf("Create(pod): %v", err)
	}
	const slice = "kdstest-burstable-poda1_b2.slice"
	dir := filepath.Join(under, "kdstest.slice", "kdstest-burstable.slice", slice)
	if got := d.Dir(pod); got != dir {
		t.Errorf("Dir(pod) = %s, want %s", got, dir)
	}
	file := func(controller, name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(mounts.V1[controller].Mountpoint, dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	for name, want := range map[string]string{"cpu.shares": "512", "cpu.cfs_quota_us": "50000", "cpu.cfs_period_us": "100000"} {
		if got := file("cpu", name); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	if got := file("memory", "memory.limit_in_bytes"); got != strconv.Itoa(64<<20) {
		t.Errorf("memory.limit_in_bytes = %s", got)
	}
	if got := file("pids", "pids.max"); got != "100" {
		t.Errorf("pids.max = %s", got)
	}
	if got := file("cpuset", "cpuset.cpus"); got == "" {
		t.Error("the pod's cpuset has no cpus")
	}
	if err := d.Validate(pod); err != nil || !d.Exists(pod) {
		t.Errorf("Validate(pod) = %v, Exists = %v", err, d.Exists(pod))
	}
	prop := func(name string) any {
		t.Helper()
		p, err := conn.GetUnitTypePropertyContext(ctx, slice, "Slice", name)
		if err != nil {
			t.Fatal(err)
		}
		return p.Value.Value()
	}
	if got := prop("MemoryLimit"); got != uint64(64<<20) {
		t.Errorf("unit MemoryLimit = %v", got)
	}
	if got := prop("CPUShares"); got != uint64(512) {
		t.Errorf("unit CPUShares = %v", got)
	}
	if got := prop("CPUQuotaPerSecUSec"); got != uint64(500000) {
		t.Errorf("unit CPUQuotaPerSecUSec = %v", got)
	}
	if got := prop("TasksMax"); got != uint64(100) {
		t.Errorf("unit TasksMax = %v", got)
	}
	t.Logf("%s: cpu.shares %s, cfs_quota %s, memory.limit %s, pids.max %s; unit MemoryLimit %v CPUQuotaPerSecUSec %v",
		dir, file("cpu", "cpu.shares"), file("cpu", "cpu.cfs_quota_us"), file("memory", "memory.limit_in_bytes"), file("pids", "pids.max"),
		prop("MemoryLimit"), prop("CPUQuotaPerSecUSec"))
	kids, err := d.Children(qos)
	if err != nil || !slices.Contains(kids, slice) {
		t.Errorf("Children(burstable) = %v, %v; want %s", kids, err, slice)
	}

	more := int64(128 << 20)
	if err := d.Update(pod, &Resources{Memory: &more}); err != nil {
		t.Fatal(err)
	}
	if got := file("memory", "memory.limit_in_bytes"); got != strconv.Itoa(128<<20) {
		t.Errorf("after Update: memory.limit_in_bytes = %s", got)
	}
	if got := prop("MemoryLimit"); got != uint64(128<<20) {
		t.Errorf("after Update: unit MemoryLimit = %v", got)
	}
	applied, err := d.Read(pod)
	if err != nil || *applied.Memory != 128<<20 || *applied.CPUShares != 512 {
		t.Errorf("Read(pod) = %+v, %v", applied, err)
	}

	for _, n := range []Name{pod, qos, root} {
		if err := d.Destroy(n); err != nil {
			t.Fatalf("Destroy(%v): %v", n, err)
		}
	}
	if d.Exists(pod) {
		t.Error("the pod's cgroup exists after Destroy")
	}
	for _, c := range []string{"memory", "cpuset", "hugetlb"} {
		if _, err := os.Stat(filepath.Join(mounts.V1[c].Mountpoint, under, "kdstest.slice")); !os.IsNotExist(err) {
			t.Errorf("%s: kdstest.slice left after Destroy: %v", c, err)
		}
	}
	units, err := conn.ListUnitsByNamesContext(ctx, []string{slice})
	if err != nil || len(units) != 1 || units[0].ActiveState != "inactive" {
		t.Errorf("the pod's slice after Destroy: %+v, %v; want inactive", units, err)
	}
}
