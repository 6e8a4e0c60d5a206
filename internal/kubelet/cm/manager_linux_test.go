package cm

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/eventtest"
)

// hostMounts reads this host's cgroup mounts; the tests need cgroup v1 (this
// machine's layout) and root.
func hostMounts(t *testing.T) cgroups.Mounts {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := cgroups.ParseMountinfo(f)
	if err != nil {
		t.Fatal(err)
	}
	if m.Mode() != cgroups.ModeV1 && m.Mode() != cgroups.ModeHybrid {
		t.Fatalf("these tests need the v1 cgroup controllers of this machine; mode %v", m.Mode())
	}
	return m
}

// kubeletHierarchies are the distinct mountpoints of the v1 hierarchies the
// cgroupfs driver creates the kubelet's cgroups in (those mounted).
func kubeletHierarchies(mounts cgroups.Mounts) []string {
	var out []string
	for _, s := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "hugetlb", "blkio", "devices",
		"freezer", "perf_event", "net_cls", "net_prio", "name=systemd"} {
		if m, ok := mounts.V1[s]; ok && !slices.Contains(out, m.Mountpoint) {
			out = append(out, m.Mountpoint)
		}
	}
	return out
}

func testPod(uid string, reqs, lims v1.ResourceList) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: k8stypes.UID(uid)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: reqs, Limits: lims}}}}}
}

func readCgroup(t *testing.T, mp, path, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(mp, path, file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// The tree on the real cgroup v1 filesystem, under a root of the test's own:
// kubepods with the node's values, the QoS cgroups, one cgroup per pod in its
// QoS class with upstream's values and the pids limit, the burstable shares
// following the pods, and orphans (a process still inside) killed and removed.
func TestManagerOnHostCgroups(t *testing.T) {
	mounts := hostMounts(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	root := "/cmtest-" + hex.EncodeToString(b)
	mem, shares, pids := int64(8<<30), uint64(2048), int64(10000)
	m, err := New(Options{Driver: cgroups.Cgroupfs, CgroupRoot: root, CgroupsPerQOS: true, PodPidsLimit: 100,
		Pod: PodConfig{EnforceCPULimits: true, CPUPeriod: 100 * time.Millisecond}, Mounts: &mounts,
		Kubepods: &cgroups.Resources{Memory: &mem, CPUShares: &shares, PidsLimit: &pids}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.cg.Destroy(cgroups.ParseCgroupfs(root)) })
	var pods []*v1.Pod
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	cpu, memory, pidsMP := mounts.V1["cpu"].Mountpoint, mounts.V1["memory"].Mountpoint, mounts.V1["pids"].Mountpoint
	kubepods := root + "/kubepods"
	for file, want := range map[string]string{"cpu.shares": "2048"} {
		if got := readCgroup(t, cpu, kubepods, file); got != want {
			t.Errorf("kubepods %s = %s, want %s", file, got, want)
		}
	}
	if got := readCgroup(t, memory, kubepods, "memory.limit_in_bytes"); got != strconv.FormatInt(mem, 10) {
		t.Errorf("kubepods memory limit %s", got)
	}
	if got := readCgroup(t, pidsMP, kubepods, "pids.max"); got != "10000" {
		t.Errorf("kubepods pids.max %s", got)
	}
	if got := readCgroup(t, cpu, kubepods+"/besteffort", "cpu.shares"); got != "2" {
		t.Errorf("besteffort cpu.shares %s", got)
	}

	q := func(s string) v1.ResourceList {
		out := v1.ResourceList{}
		for _, kv := range strings.Split(s, ",") {
			k, v, _ := strings.Cut(kv, "=")
			out[v1.ResourceName(k)] = resource.MustParse(v)
		}
		return out
	}
	guaranteed := testPod("g-1", q("cpu=500m,memory=64Mi"), q("cpu=500m,memory=64Mi"))
	burstable := testPod("b-2", q("cpu=250m"), nil)
	besteffort := testPod("e-3", nil, nil)
	pods = []*v1.Pod{guaranteed, burstable, besteffort}
	for _, p := range pods {
		if err := m.EnsurePod(p, pods); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		pod    *v1.Pod
		path   string
		files  map[string]string // cpu hierarchy
		memory string
	}{
		{guaranteed, kubepods + "/podg-1", map[string]string{"cpu.shares": "512", "cpu.cfs_quota_us": "50000", "cpu.cfs_period_us": "100000"}, strconv.Itoa(64 << 20)},
		{burstable, kubepods + "/burstable/podb-2", map[string]string{"cpu.shares": "256", "cpu.cfs_quota_us": "-1"}, ""},
		{besteffort, kubepods + "/besteffort/pode-3", map[string]string{"cpu.shares": "2", "cpu.cfs_quota_us": "-1"}, ""},
	} {
		if got := m.PodCgroupParent(tc.pod); got != tc.path {
			t.Errorf("PodCgroupParent(%s) = %s, want %s", tc.pod.Name, got, tc.path)
		}
		for file, want := range tc.files {
			if got := readCgroup(t, cpu, tc.path, file); got != want {
				t.Errorf("%s %s = %s, want %s", tc.path, file, got, want)
			}
		}
		if tc.memory != "" {
			if got := readCgroup(t, memory, tc.path, "memory.limit_in_bytes"); got != tc.memory {
				t.Errorf("%s memory limit %s, want %s", tc.path, got, tc.memory)
			}
		}
		if got := readCgroup(t, pidsMP, tc.path, "pids.max"); got != "100" {
			t.Errorf("%s pids.max %s, want 100 (--pod-max-pids)", tc.path, got)
		}
	}
	if got := readCgroup(t, cpu, kubepods+"/burstable", "cpu.shares"); got != "256" {
		t.Errorf("burstable cpu.shares = %s, want the Burstable pods' requests (256)", got)
	}
	uids, err := m.PodUIDs()
	if err != nil || len(uids) != 3 || !uids["g-1"] || !uids["b-2"] || !uids["e-3"] {
		t.Fatalf("PodUIDs = %v, %v", uids, err)
	}

	// An orphan with a process still inside is killed and removed.
	sleeper := exec.Command("sleep", "300")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Process.Kill() }()
	for _, mp := range kubeletHierarchies(mounts) {
		if err := os.WriteFile(filepath.Join(mp, kubepods, "burstable/podb-2", "cgroup.procs"), []byte(strconv.Itoa(sleeper.Process.Pid)), 0o644); err != nil {
			t.Fatalf("move the sleeper into %s: %v", mp, err)
		}
	}
	pods = []*v1.Pod{guaranteed, besteffort}
	if err := m.CleanupOrphans(map[k8stypes.UID]bool{"g-1": true, "e-3": true}); err != nil {
		t.Fatal(err)
	}
	if err := sleeper.Wait(); err == nil {
		t.Error("the orphan's process was not killed")
	}
	for _, mp := range kubeletHierarchies(mounts) {
		if _, err := os.Stat(filepath.Join(mp, kubepods, "burstable/podb-2")); !os.IsNotExist(err) {
			t.Errorf("orphan cgroup left in %s: %v", mp, err)
		}
	}
	if err := m.UpdateQoS(pods); err != nil {
		t.Fatal(err)
	}
	if got := readCgroup(t, cpu, kubepods+"/burstable", "cpu.shares"); got != "2" {
		t.Errorf("burstable cpu.shares without Burstable pods = %s, want 2", got)
	}
	if err := m.DestroyPod("g-1"); err != nil {
		t.Fatal(err)
	}
	if m.PodCgroupExists(guaranteed) {
		t.Error("destroyed pod cgroup still exists")
	}
}

func TestDisabledManagerManagesNothing(t *testing.T) {
	t.Parallel()
	m, err := New(Options{CgroupsPerQOS: false})
	if err != nil {
		t.Fatal(err)
	}
	p := testPod("x", nil, nil)
	if m.PodCgroupParent(p) != "" || !m.PodCgroupExists(p) || m.EnsurePod(p, nil) != nil || m.DestroyPod("x") != nil {
		t.Fatal("a disabled manager acted")
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	m.Wait() // nothing was started
}

// With the systemd driver on a host without systemd (this one) the kubelet
// refuses to start, saying why; with systemd pods get their slices.
func TestSystemdDriver(t *testing.T) {
	t.Parallel()
	m, err := New(Options{Driver: cgroups.Systemd, CgroupsPerQOS: true})
	if systemdBooted() {
		if err != nil {
			t.Fatalf("New with the systemd driver on a systemd host: %v", err)
		}
		if got, want := m.PodCgroupParent(testPod("x", nil, nil)), "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podx.slice"; got != want {
			t.Errorf("pod cgroup parent %q, want %q", got, want)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), "needs systemd as the init system") {
		t.Fatalf("New with the systemd driver without systemd: %v", err)
	}
}

// A pod UID that cannot name a cgroup (a path, '_', empty) is refused: it
// never becomes a path elsewhere in the tree, least of all the root, whose
// processes DestroyPod would kill.
func TestHostileUIDsNameNoCgroup(t *testing.T) {
	t.Parallel()
	mounts := hostMounts(t)
	m, err := New(Options{Driver: cgroups.Cgroupfs, CgroupRoot: "/cmtest-never-created", CgroupsPerQOS: true, Mounts: &mounts})
	if err != nil {
		t.Fatal(err)
	}
	for _, uid := range []string{"../../..", "a/b", "a_b", ""} {
		p := testPod(uid, nil, nil)
		if got := m.PodCgroupParent(p); got != "" {
			t.Errorf("PodCgroupParent(uid %q) = %q, want none", uid, got)
		}
		if m.PodCgroupExists(p) {
			t.Errorf("PodCgroupExists(uid %q) = true", uid)
		}
		if err := m.EnsurePod(p, nil); err == nil {
			t.Errorf("EnsurePod(uid %q) succeeded", uid)
		}
		if err := m.DestroyPod(k8stypes.UID(uid)); err == nil {
			t.Errorf("DestroyPod(uid %q) succeeded", uid)
		}
	}
	if err := m.cg.Destroy(cgroups.Name{}); err == nil {
		t.Error("Destroy of the root cgroup succeeded")
	}
	for _, mp := range kubeletHierarchies(mounts) {
		if _, err := os.Stat(filepath.Join(mp, "cmtest-never-created")); !os.IsNotExist(err) {
			t.Errorf("a cgroup was made in %s: %v", mp, err)
		}
	}
}

// Reservations enforced on their existing cgroups (enforceNodeAllocatable
// system-reserved and kube-reserved-compressible): the values written, the
// compressible form writing cpu shares alone, upstream's events; a missing
// cgroup stops Start with upstream's message and a warning event.
func TestReservedCgroupsEnforced(t *testing.T) {
	mounts := hostMounts(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	root := "/cmtest-" + hex.EncodeToString(b)
	f, err := cgroups.NewCgroupfs(mounts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Destroy(cgroups.ParseCgroupfs(root)) })
	system, kube := root+"/system.slice", root+"/kube.slice"
	for _, p := range []string{system, kube} {
		if err := f.Create(cgroups.ParseCgroupfs(p), nil); err != nil {
			t.Fatal(err)
		}
	}
	memBefore := readCgroup(t, mounts.V1["memory"].Mountpoint, kube, "memory.limit_in_bytes")
	shares, mem, pids := uint64(512), int64(256<<20), int64(1000)
	kubeShares := uint64(1024)
	type event struct{ typ, reason, msg string }
	nodeRef := &v1.ObjectReference{Kind: "Node", Name: "n"}
	rec := &eventtest.Recorder{}
	recorded := func() []event {
		var out []event
		for _, e := range rec.About(t, nodeRef) {
			out = append(out, event{e.Type, e.Reason, e.Message})
		}
		return out
	}
	m, err := New(Options{Driver: cgroups.Cgroupfs, CgroupRoot: root, CgroupsPerQOS: true, Mounts: &mounts, Recorder: rec, NodeRef: nodeRef,
		Reserved: []ReservedCgroup{
			{What: "System Reserved", Cgroup: system, Config: &cgroups.Resources{CPUShares: &shares, Memory: &mem, PidsLimit: &pids}},
			{What: "Kube Reserved Compressible", Cgroup: kube, Config: &cgroups.Resources{CPUShares: &kubeShares}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ mp, path, file, want string }{
		{mounts.V1["cpu"].Mountpoint, system, "cpu.shares", "512"},
		{mounts.V1["memory"].Mountpoint, system, "memory.limit_in_bytes", strconv.FormatInt(256<<20, 10)},
		{mounts.V1["pids"].Mountpoint, system, "pids.max", "1000"},
		{mounts.V1["cpu"].Mountpoint, kube, "cpu.shares", "1024"},
		{mounts.V1["memory"].Mountpoint, kube, "memory.limit_in_bytes", memBefore}, // compressible: memory untouched
	} {
		if got := readCgroup(t, c.mp, c.path, c.file); got != c.want {
			t.Errorf("%s %s = %s, want %s", c.path, c.file, got, c.want)
		}
	}
	events := recorded()
	want := []event{
		{"Normal", EventSuccessfulEnforcement, "Updated Node Allocatable limit across pods"},
		{"Normal", EventSuccessfulEnforcement, "Updated limits on system reserved cgroup " + system},
		{"Normal", EventSuccessfulEnforcement, "Updated limits on kube reserved cgroup " + kube},
	}
	if len(events) != len(want) {
		t.Fatalf("events %v, want %v", events, want)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Errorf("event %d = %v, want %v", i, events[i], want[i])
		}
	}

	// A reservation whose cgroup does not exist.
	rec = &eventtest.Recorder{}
	missing := root + "/missing.slice"
	m, err = New(Options{Driver: cgroups.Cgroupfs, CgroupRoot: root, CgroupsPerQOS: true, Mounts: &mounts, Recorder: rec, NodeRef: nodeRef,
		Reserved: []ReservedCgroup{{What: "Kube Reserved", Cgroup: missing, Config: &cgroups.Resources{CPUShares: &kubeShares}}}})
	if err != nil {
		t.Fatal(err)
	}
	err = m.Start(t.Context())
	prefix := `Failed to enforce Kube Reserved Cgroup Limits on "` + missing + `": cgroup ["` + strings.TrimPrefix(root, "/") + `" "missing.slice"] has some missing paths: ` +
		filepath.Join(mounts.V1["cpu"].Mountpoint, missing)
	if err == nil || !strings.HasPrefix(err.Error(), prefix) {
		t.Fatalf("Start with a missing reserved cgroup = %v, want %s...", err, prefix)
	}
	events = recorded()
	if n := len(events); n != 2 || events[1].typ != "Warning" || events[1].reason != EventFailedEnforcement || events[1].msg != err.Error() {
		t.Errorf("events %v, want the kubepods success then a %s warning with the error", events, EventFailedEnforcement)
	}
	// No reservation configured for an enforced cgroup.
	m, err = New(Options{Driver: cgroups.Cgroupfs, CgroupRoot: root, CgroupsPerQOS: true, Mounts: &mounts,
		Reserved: []ReservedCgroup{{What: "System Reserved", Cgroup: system}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "cgroup is not configured properly") {
		t.Errorf("Start without a systemReserved list = %v", err)
	}
}

// qosReserved (the QOSReserved gate) on the real cgroup v1 filesystem: with
// 50% of 1Gi allocatable memory reserved, a Guaranteed pod requesting 256Mi
// leaves burstable 1Gi-128Mi, and a Burstable pod requesting 128Mi leaves
// besteffort 64Mi less; without pods both get the whole 1Gi.
func TestQOSReservedOnHostCgroups(t *testing.T) {
	mounts := hostMounts(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	root := "/cmtest-" + hex.EncodeToString(b)
	half := int64(50)
	m, err := New(Options{Driver: cgroups.Cgroupfs, CgroupRoot: root, CgroupsPerQOS: true, Mounts: &mounts,
		QOSReservedMemory: &half, AllocatableMemory: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.cg.Destroy(cgroups.ParseCgroupfs(root)) })
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	memory := mounts.V1["memory"].Mountpoint
	kubepods := root + "/kubepods"
	limits := func() (string, string) {
		return readCgroup(t, memory, kubepods+"/burstable", "memory.limit_in_bytes"), readCgroup(t, memory, kubepods+"/besteffort", "memory.limit_in_bytes")
	}
	if err := m.UpdateQoS(nil); err != nil {
		t.Fatal(err)
	}
	if b, be := limits(); b != strconv.Itoa(1<<30) || be != strconv.Itoa(1<<30) {
		t.Errorf("without pods: burstable %s, besteffort %s; want both 1Gi", b, be)
	}
	mem := func(q string) v1.ResourceList { return v1.ResourceList{v1.ResourceMemory: resource.MustParse(q)} }
	guaranteed := v1.ResourceList{v1.ResourceMemory: resource.MustParse("256Mi"), v1.ResourceCPU: resource.MustParse("100m")}
	pods := []*v1.Pod{testPod("g-1", guaranteed, guaranteed), testPod("b-2", mem("128Mi"), nil), testPod("e-3", nil, nil)}
	if err := m.UpdateQoS(pods); err != nil {
		t.Fatal(err)
	}
	if b, be := limits(); b != strconv.Itoa(1<<30-128<<20) || be != strconv.Itoa(1<<30-128<<20-64<<20) {
		t.Errorf("burstable %s, besteffort %s; want %d and %d", b, be, 1<<30-128<<20, 1<<30-128<<20-64<<20)
	}
}
