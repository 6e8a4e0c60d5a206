//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/cpumanager"
)

// The static CPU manager (issue 12 item 4) on this machine's CPUs, with
// --reserved-cpus=0: a Guaranteed pod asking for one CPU runs alone on the
// last one, a BestEffort pod on the shared pool (what is left); the
// assignment is in <root-dir>/cpu_manager_state, survives a kubelet restart
// without restarting anything, and goes with the pod, whose CPU returns to the
// shared pool (the running BestEffort container is moved onto it by the
// reconcile loop); a pod asking for more CPUs than are free is rejected with
// upstream's reason.
func TestIntegrationDockerModeCPUManagerStatic(t *testing.T) {
	ncpu := runtime.NumCPU()
	if ncpu < 2 {
		t.Fatalf("the static CPU manager test needs at least 2 CPUs, this machine has %d", ncpu)
	}
	all := fmt.Sprintf("0-%d", ncpu-1)
	n := newNode(t)
	n.extra = append(n.extra, "--cpu-manager-policy=static", "--reserved-cpus=0", "--cpu-manager-reconcile-period=1s")
	n.start()
	n.writeManifest("excl.yaml", cpuPodManifest("excl", "1"))
	n.writeManifest("shared.yaml", cpuPodManifest("shared", ""))
	excl := n.waitPod("excl", podStartTimeout, "running", runningAndReady)
	shared := n.waitPod("shared", podStartTimeout, "running", runningAndReady)

	// The single CPU comes from the lowest free core: with CPU 0 reserved,
	// CPU 1; the shared pool is everything else.
	exclCPUs := "1"
	ids := make([]int, ncpu)
	for i := range ids {
		ids[i] = i
	}
	pool := cpuset.New(ids...).Difference(cpuset.New(1)).String()
	exclID := n.cpuCheck(excl, "app", exclCPUs)
	sharedID := n.cpuCheck(shared, "app", pool)
	n.checkCPUState(map[string]map[string]string{string(excl.UID): {"app": exclCPUs}}, pool)

	// A restart keeps the assignment and every container.
	if err := n.kubelet.stop(30 * time.Second); err != nil {
		t.Fatalf("stopping the kubelet: %v", err)
	}
	n.start()
	time.Sleep(3 * time.Second) // a few reconcile periods
	excl = n.waitPod("excl", podStartTimeout, "running after the restart", runningAndReady)
	if id := n.cpuCheck(excl, "app", exclCPUs); id != exclID || restartCounts(excl)["app"] != 0 {
		t.Errorf("after the restart the exclusive container is %.12s (restarts %d), want %.12s untouched", id, restartCounts(excl)["app"], exclID)
	}
	n.checkCPUState(map[string]map[string]string{string(excl.UID): {"app": exclCPUs}}, pool)

	// More CPUs than are free: rejected at admission.
	n.writeManifest("big.yaml", cpuPodManifest("big", fmt.Sprint(ncpu)))
	big := n.waitPod("big", 60*time.Second, "rejected", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	wantMsg := fmt.Sprintf("Pod was rejected: Allocate failed due to not enough cpus available to satisfy request: requested=%d, available=%d, which is unexpected", ncpu, ncpu-2)
	if big.Status.Reason != "UnexpectedAdmissionError" || big.Status.Message != wantMsg {
		t.Errorf("pod asking for %d CPUs: reason %q message %q, want UnexpectedAdmissionError and %q", ncpu, big.Status.Reason, big.Status.Message, wantMsg)
	}

	// The exclusive pod goes: its CPU returns to the pool, and the shared
	// container is moved onto the whole pool.
	n.removeManifest("excl.yaml")
	n.waitGone(string(excl.UID))
	n.checkCPUState(map[string]map[string]string{}, all)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if got := n.cpusAllowed(sharedID); got == all {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("shared container runs on CPUs %s 30s after the exclusive pod went, want %s", got, all)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// The static policy's options (full-pcpus-only, strict-cpu-reservation) on
// this machine's CPUs with --reserved-cpus=0: turning strict-cpu-reservation on
// over a state whose pool holds CPU 0 stops the kubelet with upstream's error
// until the state file is removed; then the pool is every CPU but the reserved
// one (a BestEffort pod runs there), a Guaranteed pod asking for more than the
// free whole cores (the reserved CPU's core does not count) is rejected with
// upstream's SMTAlignmentError, and upstream's CPU manager series count it.
func TestIntegrationDockerModeCPUManagerOptions(t *testing.T) {
	ncpu := runtime.NumCPU()
	if ncpu < 2 {
		t.Fatalf("the CPU manager options test needs at least 2 CPUs, this machine has %d", ncpu)
	}
	topo, err := cpumanager.DiscoverTopology("/sys") // the kubelet's count of CPUs per core
	if err != nil {
		t.Fatal(err)
	}
	perCore := topo.CPUsPerCore()
	n := newNode(t)
	n.extra = append(n.extra, "--cpu-manager-policy=static", "--reserved-cpus=0", "--cpu-manager-reconcile-period=1s")
	n.start()
	all := fmt.Sprintf("0-%d", ncpu-1)
	n.checkCPUState(map[string]map[string]string{}, all)
	if err := n.kubelet.stop(30 * time.Second); err != nil {
		t.Fatalf("stopping the kubelet: %v", err)
	}

	n.extra = append(n.extra, "--cpu-manager-policy-options=full-pcpus-only=true,strict-cpu-reservation=true")
	n.startRefused(fmt.Sprintf(`start cpu manager error: some of strictly reserved cpus: "0" are present in defaultCpuSet: "%s"`, all))
	if err := os.Remove(filepath.Join(n.rootDir, "cpu_manager_state")); err != nil {
		t.Fatal(err)
	}
	n.start()
	ids := make([]int, ncpu)
	for i := range ids {
		ids[i] = i
	}
	pool := cpuset.New(ids...).Difference(cpuset.New(0)).String()
	n.checkCPUState(map[string]map[string]string{}, pool)
	n.writeManifest("shared.yaml", cpuPodManifest("shared", ""))
	shared := n.waitPod("shared", podStartTimeout, "running", runningAndReady)
	n.cpuCheck(shared, "app", pool)

	n.writeManifest("big.yaml", cpuPodManifest("big", fmt.Sprint(ncpu)))
	big := n.waitPod("big", 60*time.Second, "rejected", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	wantMsg := fmt.Sprintf("Pod was rejected: SMT Alignment Error: not enough free physical CPUs: available physical CPUs = %d, requested CPUs = %d, CPUs per core = %d",
		ncpu-perCore, ncpu, perCore)
	if big.Status.Reason != "SMTAlignmentError" || big.Status.Message != wantMsg {
		t.Errorf("pod asking for %d CPUs: reason %q message %q, want SMTAlignmentError and %q", ncpu, big.Status.Reason, big.Status.Message, wantMsg)
	}
	for name, want := range map[string]float64{
		"kubelet_cpu_manager_shared_pool_size_millicores":                                                      float64(ncpu-1) * 1000,
		"kubelet_cpu_manager_exclusive_cpu_allocation_count":                                                   0,
		"kubelet_cpu_manager_pinning_requests_total":                                                           1,
		"kubelet_cpu_manager_pinning_errors_total":                                                             1,
		`kubelet_container_aligned_compute_resources_count{boundary="physical_cpu",scope="container"}`:         0,
		`kubelet_container_aligned_compute_resources_failure_count{boundary="physical_cpu",scope="container"}`: 1,
	} {
		if got, err := n.metric(name); err != nil || got != want {
			t.Errorf("%s = %v (%v), want %v", name, got, err, want)
		}
	}
}

// startRefused starts the kubelet and expects it to exit with an error whose
// log holds want (the "Error: ..." line prints the error as is; the log's
// JSON fields escape quotes).
func (n *node) startRefused(want string) {
	n.t.Helper()
	p, err := startProcEnv("kubelet", filepath.Join(n.dir, "kubelet.log"), n.s.bin, n.env, n.args()...)
	if err != nil {
		n.t.Fatal(err)
	}
	n.procs = append(n.procs, p)
	if !p.wait(60 * time.Second) {
		n.t.Fatalf("the kubelet did not exit within 60s; want it refused with %s", want)
	}
	if p.exitCode() == 0 {
		n.t.Errorf("the kubelet exited 0; want it refused with %s", want)
	}
	data, err := os.ReadFile(filepath.Join(n.dir, "kubelet.log"))
	if err != nil {
		n.t.Fatal(err)
	}
	if !strings.Contains(string(data), want) {
		n.t.Errorf("the kubelet's log lacks %s; its end:\n%s", want, tailFile(filepath.Join(n.dir, "kubelet.log"), 10))
	}
}

// cpuPodManifest is a sleeper; cpus != "" makes it Guaranteed with that many
// CPUs.
func cpuPodManifest(name, cpus string) string {
	spec := `  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sleep", "3600"]
`
	if cpus != "" {
		spec += fmt.Sprintf(`    resources:
      requests: {cpu: "%s", memory: 32Mi}
      limits: {cpu: "%s", memory: 32Mi}
`, cpus, cpus)
	}
	return manifest(name, spec)
}

// cpuCheck checks that container name of p runs on exactly cpus (Docker's
// cpuset and the kernel's affinity of its process) and returns its ID.
func (n *node) cpuCheck(p *v1.Pod, name, cpus string) string {
	n.t.Helper()
	ids := n.containers(false, "io.kubernetes.pod.uid="+string(p.UID), "io.kubernetes.container.name="+name)
	if len(ids) != 1 {
		n.t.Fatalf("pod %s: running containers %s: %v", p.Name, name, ids)
	}
	out, err := n.s.dockerCLI(context.Background(), "inspect", "-f", "{{.HostConfig.CpusetCpus}}", ids[0])
	if err != nil {
		n.t.Fatalf("docker inspect: %v: %s", err, out)
	}
	if got := strings.TrimSpace(out); got != cpus {
		n.t.Errorf("pod %s container %s: Docker cpuset %q, want %q", p.Name, name, got, cpus)
	}
	if got := n.cpusAllowed(ids[0]); got != cpus {
		n.t.Errorf("pod %s container %s: process runs on CPUs %s, want %s", p.Name, name, got, cpus)
	}
	return ids[0]
}

// cpusAllowed is the Cpus_allowed_list of a container's main process.
func (n *node) cpusAllowed(id string) string {
	n.t.Helper()
	out, err := n.s.dockerCLI(context.Background(), "inspect", "-f", "{{.State.Pid}}", id)
	if err != nil {
		n.t.Fatalf("docker inspect: %v: %s", err, out)
	}
	status, err := os.ReadFile("/proc/" + strings.TrimSpace(out) + "/status")
	if err != nil {
		n.t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	n.t.Fatalf("no Cpus_allowed_list in /proc/<pid>/status of %.12s", id)
	return ""
}

// checkCPUState reads <root-dir>/cpu_manager_state (upstream's format):
// policy static, the default set and the exclusive assignments.
func (n *node) checkCPUState(entries map[string]map[string]string, defaultSet string) {
	n.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, err := os.ReadFile(filepath.Join(n.rootDir, "cpu_manager_state"))
		if err != nil {
			n.t.Fatal(err)
		}
		var st struct {
			PolicyName    string                       `json:"policyName"`
			DefaultCPUSet string                       `json:"defaultCpuSet"`
			Entries       map[string]map[string]string `json:"entries"`
			Checksum      uint64                       `json:"checksum"`
		}
		if err := json.Unmarshal(data, &st); err != nil {
			n.t.Fatalf("cpu_manager_state: %v: %s", err, data)
		}
		got := st.Entries
		if got == nil {
			got = map[string]map[string]string{}
		}
		ok := st.PolicyName == "static" && st.DefaultCPUSet == defaultSet && st.Checksum != 0 && len(got) == len(entries)
		for uid, cs := range entries {
			keys := make([]string, 0, len(got[uid]))
			for k := range got[uid] {
				keys = append(keys, k)
			}
			for name, cpus := range cs {
				ok = ok && got[uid][name] == cpus && slices.Contains(keys, name)
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("cpu_manager_state = %s, want policy static, default %s, entries %v", data, defaultSet, entries)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
