//go:build linux

package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/dockerd"
)

// The dockerd restart test (issue 11 item 5): a standalone kubelet in docker
// mode runs restartPods static pods on a private dockerd, which is stopped for
// dockerdDowntime and started again on the same directories, twice:
//
//  1. with --live-restore: the containers survive; nothing restarts, and the
//     CRI log of a container printing a counter has every number exactly once
//     (log copying resumed where it stopped);
//  2. without: the containers die with the daemon; without restarting the
//     kubelet, every pod gets a new sandbox (the old IP released through CNI
//     DEL: host-local holds exactly the new pods' IPs, and iptables names no
//     other address of the node's subnet) and its container
//     restarts once; one ready sandbox and one running container per pod; a
//     CRI event stream opened before the restarts ends with Unavailable when
//     the daemon goes away (events were lost: the client must relist), and
//     the stream its client then opens again reports the new sandboxes and
//     containers (the shim's Docker event subscription came back); container
//     stats answer for every new container.
const (
	restartPods     = 10
	dockerdDowntime = 20 * time.Second
	// recoveryTimeout bounds the wait for every pod to run again after the
	// daemon is back (ten new sandboxes and containers on two busy cores).
	recoveryTimeout = 120 * time.Second
)

// counterManifest prints 0, 1, 2, ... ten times a second.
func counterManifest(name string) string {
	return manifest(name, `  containers:
  - name: count
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c", "i=0; while :; do echo $i; i=$((i+1)); sleep 0.1; done"]
`)
}

func oneSleeperManifest(name string) string {
	return manifest(name, `  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sleep", "3600"]
`)
}

// daemonView lists containers of a private dockerd by label.
type daemonView struct{ d *dockerd.Daemon }

func (v daemonView) containers(t testing.TB, all bool, labels ...string) []string {
	t.Helper()
	return v.d.Containers(t, all, labels...)
}

// removeContainers removes the daemon's containers with the label, so that
// the node's cgroups can go before the daemon's own cleanup.
func (v daemonView) removeContainers(t testing.TB, label string) {
	if ids := v.d.Containers(t, true, label); len(ids) > 0 {
		if out, err := v.d.CLI(context.Background(), append([]string{"rm", "-f"}, ids...)...); err != nil {
			t.Logf("docker rm: %v: %s", err, out)
		}
	}
}

func TestIntegrationDockerdRestart(t *testing.T) {
	requireSuite(t)
	start := time.Now()
	// Started before the node: its cleanup (remove everything, stop) runs after
	// the node's (stop the kubelet).
	d := dockerd.Start(t, dockerd.Options{Images: []string{pauseImage, busyboxImage}, LiveRestore: true})
	n := newNode(t)
	n.writeChurnCNIConf() // bridge with ipMasq + portmap: per-pod iptables rules
	n.runtime = []string{"--container-runtime=docker", "--docker-endpoint=" + d.Endpoint}
	n.rt = daemonView{d}
	n.start()
	kubeletPID := n.kubelet.pid()
	names := make([]string, 0, restartPods)
	n.writeManifest("counter.yaml", counterManifest("counter"))
	names = append(names, "counter")
	for i := range restartPods - 1 {
		name := fmt.Sprintf("r%d", i)
		n.writeManifest(name+".yaml", oneSleeperManifest(name))
		names = append(names, name)
	}
	before := n.waitPods(names, 2*podStartTimeout, "running and ready", runningAndReady)
	t.Logf("%d pods running %s after the start", len(names), time.Since(start).Round(time.Second))
	events := watchContainerEvents(t, n.endpoint)

	checkLiveRestore(t, n, d, before)
	t.Logf("live-restore phase done at %s", time.Since(start).Round(time.Second))
	checkRestartWithoutLiveRestore(t, n, d, events)
	t.Logf("restart phase done at %s", time.Since(start).Round(time.Second))

	if n.kubelet.exited() || n.kubelet.pid() != kubeletPID {
		t.Errorf("the kubelet (pid %d) did not keep running: exited %v (%v)", kubeletPID, n.kubelet.exited(), n.kubelet.err)
	}
	if body, code, err := n.get("/healthz"); err != nil || code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz after the restarts: %d %q %v", code, body, err)
	}
}

// checkLiveRestore restarts the daemon with live-restore: the same containers
// keep running, no restart counts move, and the counter's CRI log is complete.
func checkLiveRestore(t *testing.T, n *node, d *dockerd.Daemon, before map[string]*v1.Pod) {
	t.Helper()
	running := sorted(n.containers(false))
	if len(running) != 2*restartPods {
		t.Fatalf("running sandboxes and containers: %d, want %d", len(running), 2*restartPods)
	}
	restartDockerd(t, d)
	if got := sorted(n.containers(false)); !slices.Equal(got, running) {
		t.Fatalf("running containers after a live-restore restart: %v, want the same %v", got, running)
	}
	counter := before["counter"]
	ids := n.containers(false, "io.kubernetes.pod.uid="+string(counter.UID), "io.kubernetes.container.name=count")
	if len(ids) != 1 {
		t.Fatalf("counter containers: %v", ids)
	}
	// Docker holds the numbers printed while it was down; the CRI log must get
	// them too, and what follows.
	latest := dockerLastNumber(t, d, ids[0])
	waitCounterLog(t, n, counter, 0, latest, 30*time.Second)
	// Several relists and a full sync (--sync-frequency=10s) later, nothing restarted.
	time.Sleep(11 * time.Second)
	after := n.waitPods(slices.Collect(maps.Keys(before)), 10*time.Second, "still running", runningAndReady)
	for name, p := range after {
		if b, a := restartCounts(before[name]), restartCounts(p); !maps.Equal(b, a) || p.UID != before[name].UID {
			t.Errorf("pod %s: restart counts %v (uid %s) after a live-restore restart, want %v (uid %s)",
				name, a, p.UID, b, before[name].UID)
		}
	}
	if got := sorted(n.containers(false)); !slices.Equal(got, running) {
		t.Errorf("running containers 11s after a live-restore restart: %v, want the same %v", got, running)
	}
	checkCounterLog(t, n, counter, 0, latest)
}

// checkRestartWithoutLiveRestore turns live-restore off and restarts the
// daemon: every pod gets a new sandbox and restarts its container once.
func checkRestartWithoutLiveRestore(t *testing.T, n *node, d *dockerd.Daemon, events *eventRecorder) {
	t.Helper()
	names := []string{"counter"}
	for i := range restartPods - 1 {
		names = append(names, fmt.Sprintf("r%d", i))
	}
	before := n.waitPods(names, 10*time.Second, "running before the restart", runningAndReady)
	oldSandboxes := map[string]string{}
	for name, p := range before {
		sb := n.containers(false, "io.kubernetes.pod.uid="+string(p.UID), "io.kubernetes.docker.type=podsandbox")
		if len(sb) != 1 {
			t.Fatalf("pod %s: running sandboxes %v", name, sb)
		}
		oldSandboxes[name] = sb[0]
	}
	d.SetLiveRestore(t, false)
	restartDockerd(t, d)

	after := n.waitPods(names, recoveryTimeout, "running again, each container restarted once", func(p *v1.Pod) bool {
		if !runningAndReady(p) {
			return false
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount == 0 {
				return false
			}
		}
		return true
	})
	var ips, newIDs []string
	for name, p := range after {
		b := before[name]
		if p.UID != b.UID {
			t.Errorf("pod %s: uid %s, want %s", name, p.UID, b.UID)
		}
		for c, rc := range restartCounts(p) {
			if want := restartCounts(b)[c] + 1; rc != want {
				t.Errorf("pod %s container %s: restart count %d, want %d", name, c, rc, want)
			}
		}
		uid := "io.kubernetes.pod.uid=" + string(p.UID)
		sb := n.containers(false, uid, "io.kubernetes.docker.type=podsandbox")
		if len(sb) != 1 || sb[0] == oldSandboxes[name] {
			t.Errorf("pod %s: running sandboxes %v, want one new (the old one was %s)", name, sb, oldSandboxes[name])
		}
		cs := n.containers(false, uid, "io.kubernetes.docker.type=container")
		if len(cs) != 1 {
			t.Errorf("pod %s: running containers %v, want one", name, cs)
		}
		ips = append(ips, p.Status.PodIP)
		newIDs = append(newIDs, append(sb, cs...)...)
	}
	// The old sandboxes went through CNI DEL although their pause processes
	// died with the daemon: host-local released their IPs, and bridge found
	// their interfaces (in the network namespaces the shim pins) to remove
	// their masquerade rules, which it skips for a namespace that is gone.
	if got := sorted(n.reservedIPs()); !slices.Equal(got, sorted(ips)) {
		t.Errorf("host-local reservations %v, want exactly the pods' IPs %v", got, sorted(ips))
	}
	if leaked := n.foreignRuleIPs(ips...); len(leaked) > 0 {
		t.Errorf("iptables rules of the old sandboxes' addresses %v outlived their CNI DEL", leaked)
	}
	events.waitStarted(t, newIDs, 15*time.Second)
	checkStats(t, n.endpoint, newIDs)
	if log, err := n.podLog(after["counter"], "count", 1); err != nil || !strings.HasPrefix(log, "0\n") {
		t.Errorf("the restarted counter's log 1.log: %q, %v; want it to start at 0", log, err)
	}
}

// restartDockerd stops the daemon (SIGTERM to its PID, wait for the exit),
// keeps it down for dockerdDowntime and starts it again.
func restartDockerd(t *testing.T, d *dockerd.Daemon) {
	t.Helper()
	begin := time.Now()
	d.Stop(t)
	stopped := time.Now()
	t.Logf("dockerd (pid %d) stopped in %s; starting it again in %s", d.PID(), stopped.Sub(begin).Round(100*time.Millisecond), dockerdDowntime)
	time.Sleep(dockerdDowntime)
	d.Launch(t)
	t.Logf("dockerd back as pid %d after %s", d.PID(), time.Since(stopped).Round(100*time.Millisecond))
}

// waitPods polls /pods until every pod of names satisfies cond.
func (n *node) waitPods(names []string, timeout time.Duration, what string, cond func(*v1.Pod) bool) map[string]*v1.Pod {
	n.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, missing := map[string]*v1.Pod{}, []string{}
		pods, err := n.pods()
		for _, name := range names {
			found := false
			for i := range pods {
				if pods[i].Name == n.podName(name) && cond(&pods[i]) {
					got[name], found = &pods[i], true
					break
				}
			}
			if !found {
				missing = append(missing, name)
			}
		}
		if err == nil && len(missing) == 0 {
			return got
		}
		if n.kubelet.exited() {
			n.t.Fatalf("kubelet exited (%v) while waiting for pods: %s", n.kubelet.err, what)
		}
		if time.Now().After(deadline) {
			var last []v1.Pod
			for i := range pods {
				if slices.Contains(missing, strings.TrimSuffix(pods[i].Name, "-"+n.name)) {
					last = append(last, pods[i])
				}
			}
			n.t.Fatalf("pods %v: %s: not within %s (err %v); their last status:\n%s", missing, what, timeout, err, podsJSON(last))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// dockerLastNumber is the last number Docker has logged for the counter.
func dockerLastNumber(t *testing.T, d *dockerd.Daemon, id string) int {
	t.Helper()
	out, err := d.CLI(context.Background(), "logs", "--tail", "1", id)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	v, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("docker logs of the counter: %q", out)
	}
	return v
}

// counterNumbers parses the counter's CRI log (restart attempt) as numbers.
func counterNumbers(n *node, p *v1.Pod, restart int) ([]int, error) {
	log, err := n.podLog(p, "count", restart)
	if err != nil {
		return nil, err
	}
	var nums []int
	for _, line := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
		v, err := strconv.Atoi(line)
		if err != nil {
			return nums, fmt.Errorf("line %d of the counter log: %q", len(nums)+1, line)
		}
		nums = append(nums, v)
	}
	return nums, nil
}

// waitCounterLog waits until the counter's CRI log has reached at least want.
func waitCounterLog(t *testing.T, n *node, p *v1.Pod, restart, want int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		nums, err := counterNumbers(n, p, restart)
		if err == nil && len(nums) > 0 && nums[len(nums)-1] >= want {
			return
		}
		if time.Now().After(deadline) {
			last := -1
			if len(nums) > 0 {
				last = nums[len(nums)-1]
			}
			t.Fatalf("the counter's CRI log ends at %d (err %v), not at %d or later within %s: log copying did not resume",
				last, err, want, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkCounterLog checks that the counter's CRI log is 0, 1, 2, ... up to at
// least atLeast, with no number missing or repeated.
func checkCounterLog(t *testing.T, n *node, p *v1.Pod, restart, atLeast int) {
	t.Helper()
	nums, err := counterNumbers(n, p, restart)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range nums {
		if v != i {
			t.Fatalf("the counter's CRI log has %d at line %d, want %d (lines lost or repeated); around it: %v",
				v, i+1, i, nums[max(0, i-3):min(len(nums), i+4)])
		}
	}
	if len(nums) <= atLeast {
		t.Fatalf("the counter's CRI log ends at %d, want at least %d", len(nums)-1, atLeast)
	}
}

// eventRecorder keeps the CRI container events of a client that subscribes
// again whenever its stream ends with Unavailable (a gap: events were lost).
type eventRecorder struct {
	mu      sync.Mutex
	started map[string]bool
	gaps    int   // streams that ended with Unavailable
	err     error // why the recording ended, if it did
}

// watchContainerEvents opens a GetContainerEvents stream on the kubelet's
// in-process shim and records CONTAINER_STARTED events until the test ends,
// subscribing again after each gap.
func watchContainerEvents(t *testing.T, endpoint string) *eventRecorder {
	t.Helper()
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc client: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	client := runtimeapi.NewRuntimeServiceClient(conn)
	stream, err := client.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatalf("GetContainerEvents: %v", err)
	}
	r := &eventRecorder{started: map[string]bool{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ev, err := stream.Recv()
			if status.Code(err) == codes.Unavailable && ctx.Err() == nil {
				r.mu.Lock()
				r.gaps++
				r.mu.Unlock()
				if stream, err = client.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{}); err == nil {
					continue
				}
			}
			r.mu.Lock()
			if err != nil {
				r.err = err
				r.mu.Unlock()
				return
			}
			if ev.ContainerEventType == runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT {
				r.started[ev.ContainerId] = true
			}
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = conn.Close()
	})
	return r
}

// waitStarted waits until the stream reported every one of ids as started.
func (r *eventRecorder) waitStarted(t *testing.T, ids []string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r.mu.Lock()
		var missing []string
		for _, id := range ids {
			if !r.started[id] {
				missing = append(missing, id)
			}
		}
		streamErr, gaps := r.err, r.gaps
		r.mu.Unlock()
		if len(missing) == 0 {
			if gaps == 0 {
				t.Error("the CRI event stream opened before the restarts did not end when the daemon went away: its client was not told that events were lost")
			}
			return
		}
		if streamErr != nil || time.Now().After(deadline) {
			t.Errorf("the CRI event streams (subscribed again after %d gaps) did not report %d of %d new containers as started (error: %v): the shim's Docker event subscription did not come back",
				gaps, len(missing), len(ids), streamErr)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkStats asks the shim for the stats of ids: each must have CPU and memory.
func checkStats(t *testing.T, endpoint string, ids []string) {
	t.Helper()
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc client: %v", err)
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := rt.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{})
	if err != nil {
		t.Errorf("ListContainerStats after the restart: %v", err)
		return
	}
	have := map[string]*runtimeapi.ContainerStats{}
	for _, s := range resp.Stats {
		have[s.GetAttributes().GetId()] = s
	}
	checked := 0
	for _, id := range ids {
		if _, err := rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id}); err == nil {
			continue // a sandbox: ListContainerStats covers containers only
		}
		checked++
		s := have[id]
		if s == nil || s.Cpu == nil || s.Memory == nil || s.Memory.WorkingSetBytes == nil {
			t.Errorf("ListContainerStats after the restart: container %s: %v, want CPU and memory", id, s)
		}
	}
	if checked == 0 {
		t.Error("no container among the new IDs to check stats of")
	}
}
