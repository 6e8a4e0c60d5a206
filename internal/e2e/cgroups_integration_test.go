//go:build linux

package e2e

import (
	"context"
	"fmt"
	"slices"

	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// v1Mount returns the mountpoint of a v1 cgroup controller on this host.
func v1Mount(t *testing.T, controller string) string {
	t.Helper()
	for _, mp := range cgroupMountpoints() {
		for _, c := range strings.Split(filepath.Base(mp), ",") {
			if c == controller {
				return mp
			}
		}
	}
	t.Fatalf("the %s cgroup controller is not mounted (these tests need this machine's cgroup v1)", controller)
	return ""
}

func cgroupValue(t *testing.T, controller, path, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(v1Mount(t, controller), path, file))
	if err != nil {
		t.Fatalf("read %s of %s: %v", file, path, err)
	}
	return strings.TrimSpace(string(b))
}

// Pods run in upstream's cgroup tree under the node's --cgroup-root: a
// Guaranteed pod directly under kubepods, Burstable and BestEffort ones under
// their QoS cgroups, each pod's sandbox and containers in pod<uid> with the
// pod's cpu and memory values and --pod-max-pids; a fork bomb stops at that
// limit with the node healthy; a removed pod's cgroup goes with it.
func TestIntegrationDockerModePodCgroups(t *testing.T) {
	n := newNode(t)
	n.extra = append(n.extra, "--pod-max-pids=50")
	n.start()
	sleeper := func(name, resources string) string {
		return manifest(name, `  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sleep", "3600"]
`+resources)
	}
	n.writeManifest("g.yaml", sleeper("guaranteed", `    resources:
      requests: {cpu: 200m, memory: 64Mi}
      limits: {cpu: 200m, memory: 64Mi}
`))
	n.writeManifest("b.yaml", sleeper("burstable", `    resources:
      requests: {cpu: 100m}
`))
	n.writeManifest("e.yaml", sleeper("besteffort", ""))
	kubepods := n.cgroupRoot + "/kubepods"
	for _, tc := range []struct {
		name, parent string
		cpu          map[string]string
		memory       string
	}{
		{"guaranteed", kubepods, map[string]string{"cpu.shares": "204", "cpu.cfs_quota_us": "20000", "cpu.cfs_period_us": "100000"}, strconv.Itoa(64 << 20)},
		{"burstable", kubepods + "/burstable", map[string]string{"cpu.shares": "102", "cpu.cfs_quota_us": "-1"}, ""},
		{"besteffort", kubepods + "/besteffort", map[string]string{"cpu.shares": "2", "cpu.cfs_quota_us": "-1"}, ""},
	} {
		p := n.waitPod(tc.name, podStartTimeout, "running", runningAndReady)
		if !strings.EqualFold(string(p.Status.QOSClass), tc.name) {
			t.Errorf("pod %s: QoS class %s", tc.name, p.Status.QOSClass)
		}
		podCgroup := tc.parent + "/pod" + string(p.UID)
		for file, want := range tc.cpu {
			if got := cgroupValue(t, "cpu", podCgroup, file); got != want {
				t.Errorf("pod %s: %s = %s, want %s", tc.name, file, got, want)
			}
		}
		if tc.memory != "" {
			if got := cgroupValue(t, "memory", podCgroup, "memory.limit_in_bytes"); got != tc.memory {
				t.Errorf("pod %s: memory.limit_in_bytes = %s, want %s", tc.name, got, tc.memory)
			}
		}
		if got := cgroupValue(t, "pids", podCgroup, "pids.max"); got != "50" {
			t.Errorf("pod %s: pids.max = %s, want 50 (--pod-max-pids)", tc.name, got)
		}
		// The sandbox and the container run in the pod's cgroup.
		for _, id := range n.containers(false, "io.kubernetes.pod.uid="+string(p.UID)) {
			out, err := n.s.dockerCLI(context.Background(), "inspect", "-f", "{{.HostConfig.CgroupParent}} {{.State.Pid}}", id)
			if err != nil {
				t.Fatalf("docker inspect: %v: %s", err, out)
			}
			parent, pid, _ := strings.Cut(strings.TrimSpace(out), " ")
			if parent != podCgroup {
				t.Errorf("pod %s: container %.12s has cgroup parent %q, want %q", tc.name, id, parent, podCgroup)
			}
			procCgroup, err := os.ReadFile("/proc/" + pid + "/cgroup")
			if err != nil || !strings.Contains(string(procCgroup), ":"+podCgroup+"/") {
				t.Errorf("pod %s: container %.12s runs in %s (%v), want under %s", tc.name, id, procCgroup, err, podCgroup)
			}
		}
	}
	if got := cgroupValue(t, "cpu", kubepods+"/burstable", "cpu.shares"); got != "102" {
		t.Errorf("burstable QoS cgroup cpu.shares = %s, want the Burstable pods' requests (102)", got)
	}

	// Two containers that together exceed the pod-level memory limit: the
	// kernel OOM-kills inside the pod's cgroup (its memory.failcnt rises)
	// and a neighbour pod is untouched.
	n.writeManifest("oom.yaml", manifest("oom", `  resources:
    limits: {memory: 48Mi}
  containers:
  - name: idle
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sleep", "3600"]
  - name: hog
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c", "x=$(head -c 100000000 /dev/zero | tr '\\000' a); sleep 3600"]
`))
	oom := n.waitPod("oom", podStartTimeout, "the hog OOM-killed", func(p *v1.Pod) bool {
		cs := containerStatus(p, "hog")
		if cs == nil {
			return false
		}
		for _, st := range []v1.ContainerState{cs.State, cs.LastTerminationState} {
			if st.Terminated != nil && st.Terminated.Reason == "OOMKilled" {
				return true
			}
		}
		return false
	})
	oomCgroup := kubepods + "/burstable/pod" + string(oom.UID)
	if got := cgroupValue(t, "memory", oomCgroup, "memory.limit_in_bytes"); got != strconv.Itoa(48<<20) {
		t.Errorf("pod-level memory limit: memory.limit_in_bytes = %s, want %d", got, 48<<20)
	}
	if failcnt, _ := strconv.Atoi(cgroupValue(t, "memory", oomCgroup, "memory.failcnt")); failcnt == 0 {
		t.Error("the pod cgroup's memory.failcnt did not rise: the OOM was not the pod's")
	}
	calm := n.waitPod("guaranteed", 10*time.Second, "still running", runningAndReady)
	if rc := containerStatus(calm, "app").RestartCount; rc != 0 {
		t.Errorf("the neighbour pod restarted %d times", rc)
	}

	// A fork bomb stops at the pod's pids.max; the node stays healthy.
	n.writeManifest("bomb.yaml", manifest("bomb", `  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c", "i=0; while [ $i -lt 200 ]; do sleep 3600 & i=$((i+1)); done; sleep 3600"]
`))
	bomb := n.waitPod("bomb", podStartTimeout, "started", func(p *v1.Pod) bool {
		cs := containerStatus(p, "app")
		return cs != nil && (cs.State.Running != nil || cs.LastTerminationState.Terminated != nil)
	})
	bombCgroup := kubepods + "/besteffort/pod" + string(bomb.UID)
	// The shell dies when a fork is refused ("can't fork" in its log); never
	// more than pids.max processes ran.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if cur, _ := strconv.Atoi(cgroupValue(t, "pids", bombCgroup, "pids.current")); cur > 50 {
			t.Fatalf("fork bomb: pids.current %d above pids.max 50", cur)
		}
		if log, _ := n.podLog(bomb, "app", 0); strings.Contains(log, "can't fork") {
			break
		}
		if time.Now().After(deadline) {
			log, _ := n.podLog(bomb, "app", 0)
			t.Fatalf("fork bomb: no fork refused within 60s; log %q", log)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if body, code, err := n.get("/healthz"); err != nil || code != 200 || body != "ok" {
		t.Errorf("/healthz during the fork bomb: %d %q %v", code, body, err)
	}

	// A removed pod's cgroup goes with it.
	n.removeManifest("bomb.yaml")
	n.waitGone(string(bomb.UID))
	deadline = time.Now().Add(removalTimeout)
	for {
		_, err := os.Stat(filepath.Join(v1Mount(t, "cpu"), bombCgroup))
		if os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the removed pod's cgroup %s is still there after %s", bombCgroup, removalTimeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestIntegrationKubeletCgroups: with --kubelet-cgroups the kubelet process
// runs in that cgroup, created in every hierarchy as upstream's libcontainer
// Apply does (the memory and cpu ones checked).
func TestIntegrationKubeletCgroups(t *testing.T) {
	n := newNode(t)
	cg := n.cgroupRoot + "/kubelet.service" // removed with the node's cgroup root
	n.extra = append(n.extra, "--kubelet-cgroups="+cg)
	n.start()
	pid := n.kubelet.pid()
	var lines string
	waitUntil(t, 30*time.Second, "the kubelet in "+cg, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			return false
		}
		lines = string(b)
		var memory, cpu bool
		for _, l := range strings.Split(strings.TrimSpace(lines), "\n") {
			parts := strings.SplitN(l, ":", 3)
			if len(parts) != 3 || parts[2] != cg {
				continue
			}
			for _, c := range strings.Split(parts[1], ",") {
				memory = memory || c == "memory"
				cpu = cpu || c == "cpu"
			}
		}
		return memory && cpu
	})
	if t.Failed() {
		t.Logf("/proc/%d/cgroup:\n%s", pid, lines)
	}
	procs := cgroupValue(t, "memory", cg, "cgroup.procs")
	if !slices.Contains(strings.Fields(procs), strconv.Itoa(pid)) {
		t.Errorf("memory cgroup %s lists %q, not the kubelet's pid %d", cg, procs, pid)
	}
}
