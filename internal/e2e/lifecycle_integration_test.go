//go:build linux

package e2e

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// removalTimeout bounds the wait for a removed pod's exited containers and
// sandbox to leave the runtime: the kubelet collects them shortly after the pod
// terminated (not only at the periodic container GC).
const removalTimeout = 30 * time.Second

func sleeperManifest(name, version string) string {
	return manifest(name, `  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sleep", "3600"]
    env:
    - {name: VERSION, value: "`+version+`"}
  - name: side
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sleep", "3600"]
`)
}

// waitGone waits until the pod with uid has no running container (within 30s)
// and then none at all (within removalTimeout), and logs how long each took.
func (n *node) waitGone(uid string) {
	n.t.Helper()
	start := time.Now()
	none := func(ids []string) bool { return len(ids) == 0 }
	n.waitContainers(30*time.Second, "no running container of the removed pod", false, none, "io.kubernetes.pod.uid="+uid)
	stopped := time.Since(start)
	n.waitContainers(removalTimeout, "no container of the removed pod left in the runtime", true, none, "io.kubernetes.pod.uid="+uid)
	n.t.Logf("pod %s: containers stopped after %s, removed after %s", uid, stopped.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
}

// TestIntegrationDockerModeManifestEdit is (e): editing a manifest replaces the
// pod: a new UID runs and the old pod's containers leave Docker.
func TestIntegrationDockerModeManifestEdit(t *testing.T) {
	n := newNode(t)
	n.start()
	n.writeManifest("edit.yaml", sleeperManifest("edit", "1"))
	old := n.waitPod("edit", podStartTimeout, "version 1 running", runningAndReady)
	oldIDs := n.containers(false, "io.kubernetes.pod.uid="+string(old.UID))
	if len(oldIDs) != 3 {
		t.Fatalf("running containers of version 1: %v, want sandbox + 2", oldIDs)
	}

	n.writeManifest("edit.yaml", sleeperManifest("edit", "2"))
	p := n.waitPod("edit", podStartTimeout, "a new UID running", func(p *v1.Pod) bool {
		return p.UID != old.UID && runningAndReady(p)
	})
	n.waitGone(string(old.UID))
	newIDs := n.containers(false, "io.kubernetes.pod.uid="+string(p.UID))
	if len(newIDs) != 3 {
		t.Fatalf("running containers of version 2: %v, want sandbox + 2", newIDs)
	}
	for _, id := range newIDs {
		if slices.Contains(oldIDs, id) {
			t.Errorf("container %s of the old pod is reused by the new one", id)
		}
	}
	pods, err := n.pods()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range pods {
		if q.UID == old.UID {
			t.Errorf("the old pod %s is still listed: %s", q.UID, q.Status.Phase)
		}
	}
	if ips := n.reservedIPs(); len(ips) != 1 || ips[0] != p.Status.PodIP {
		t.Errorf("host-local reservations %v, want only the new pod's %s", ips, p.Status.PodIP)
	}
}

// TestIntegrationDockerModeManifestDelete is (f): removing the manifest removes
// the pod, its containers and its IP reservation.
func TestIntegrationDockerModeManifestDelete(t *testing.T) {
	n := newNode(t)
	n.start()
	n.writeManifest("gone.yaml", sleeperManifest("gone", "1"))
	p := n.waitPod("gone", podStartTimeout, "running", runningAndReady)
	if ips := n.reservedIPs(); !slices.Contains(ips, p.Status.PodIP) {
		t.Fatalf("host-local reservations %v lack the pod IP %s", ips, p.Status.PodIP)
	}
	n.removeManifest("gone.yaml")
	n.waitNoPod("gone", 30*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for len(n.reservedIPs()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("host-local still holds %v 30s after the manifest was removed", n.reservedIPs())
		}
		time.Sleep(300 * time.Millisecond)
	}
	n.waitGone(string(p.UID))
	if body, code, err := n.get("/healthz"); err != nil || code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz after the removal: %d %q %v", code, body, err)
	}
}

// TestIntegrationDockerModeKill9Restart is (g): a kubelet killed with SIGKILL and
// restarted adopts the running pod: same containers, none added, no restarts.
func TestIntegrationDockerModeKill9Restart(t *testing.T) {
	n := newNode(t)
	n.start()
	n.writeManifest("keep.yaml", sleeperManifest("keep", "1"))
	before := n.waitPod("keep", podStartTimeout, "running", runningAndReady)
	running := n.containers(false)
	all := n.containers(true)
	slices.Sort(running)

	n.kill9()
	if got := sorted(n.containers(false)); !slices.Equal(got, running) {
		t.Fatalf("containers after kill -9 of the kubelet: %v, want %v", got, running)
	}
	n.start()
	n.waitPod("keep", podStartTimeout, "running after the restart, same UID", func(p *v1.Pod) bool {
		return p.UID == before.UID && runningAndReady(p)
	})
	// Several PLEG relists and a full sync (--sync-frequency=10s) later, nothing changed.
	time.Sleep(12 * time.Second)
	after := n.waitPod("keep", 5*time.Second, "still running", runningAndReady)
	if got := sorted(n.containers(false)); !slices.Equal(got, running) {
		t.Errorf("running containers after the restart: %v, want the same %v", got, running)
	}
	if got := n.containers(true); len(got) != len(all) {
		t.Errorf("containers (all) after the restart: %d %v, want %d (no duplicates)", len(got), got, len(all))
	}
	if b, a := restartCounts(before), restartCounts(after); !maps.Equal(b, a) {
		t.Errorf("restart counts %v after the restart, want %v", a, b)
	}
	if before.Status.PodIP != after.Status.PodIP {
		t.Errorf("pod IP changed from %s to %s", before.Status.PodIP, after.Status.PodIP)
	}
}

// TestIntegrationDockerModeBrokenManifests is (h): invalid YAML and an unknown
// field next to a good manifest: the good pod runs and keeps running, the broken
// ones never run, the kubelet stays up, also when a broken file appears later.
func TestIntegrationDockerModeBrokenManifests(t *testing.T) {
	n := newNode(t)
	n.writeManifest("bad-yaml.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: [unclosed\n  spec: :\n")
	n.writeManifest("bad-field.yaml", manifest("badfield", `  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sleep", "3600"]
    bogusField: 1
`))
	n.writeManifest("good.yaml", sleeperManifest("good", "1"))
	n.start()
	p := n.waitPod("good", podStartTimeout, "running", runningAndReady)
	ids := sorted(n.containers(false))

	n.writeManifest("later-bad.yaml", "{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": ")
	time.Sleep(6 * time.Second) // three full re-reads at --file-check-frequency=2s
	if n.kubelet.exited() {
		t.Fatalf("the kubelet exited: %v", n.kubelet.err)
	}
	if body, code, err := n.get("/healthz"); err != nil || code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz: %d %q %v", code, body, err)
	}
	after := n.waitPod("good", 5*time.Second, "still running, same UID", func(q *v1.Pod) bool {
		return q.UID == p.UID && runningAndReady(q)
	})
	if rc := restartCounts(after); rc["app"] != 0 || rc["side"] != 0 {
		t.Errorf("restart counts %v, want none", rc)
	}
	if got := sorted(n.containers(false)); !slices.Equal(got, ids) {
		t.Errorf("running containers changed from %v to %v", ids, got)
	}
	pods, err := n.pods()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range pods {
		if q.Name != n.podName("good") {
			t.Errorf("unexpected pod %s from a broken manifest", q.Name)
		}
	}
	if lines := grepFile(n.kubelet.logPath, "bad-field.yaml"); len(lines) == 0 {
		t.Error("the kubelet log does not name the broken manifest bad-field.yaml")
	} else if !strings.Contains(strings.Join(lines, "\n"), "bogusField") {
		t.Errorf("the log lines about bad-field.yaml do not name the unknown field: %s", lines[0])
	}
}

// TestIntegrationDockerModeSIGTERM is (j): SIGTERM stops the kubelet with exit
// code 0 and leaves the pod's containers running.
func TestIntegrationDockerModeSIGTERM(t *testing.T) {
	n := newNode(t)
	n.start()
	n.writeManifest("stay.yaml", sleeperManifest("stay", "1"))
	n.waitPod("stay", podStartTimeout, "running", runningAndReady)
	running := sorted(n.containers(false))
	start := time.Now()
	if err := n.kubelet.stop(30 * time.Second); err != nil {
		t.Fatalf("kubelet after SIGTERM: %v (exit code %d)", err, n.kubelet.exitCode())
	}
	t.Logf("kubelet exited %s after SIGTERM", time.Since(start).Round(10*time.Millisecond))
	if code := n.kubelet.exitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	time.Sleep(2 * time.Second)
	if got := sorted(n.containers(false)); !slices.Equal(got, running) {
		t.Errorf("running containers after the kubelet stopped: %v, want %v", got, running)
	}
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}
