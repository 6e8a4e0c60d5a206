package e2e

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// testKubectlDebug (issue 16 item 3): `kubectl debug -i --target` adds an
// ephemeral container that shares the target container's PID namespace (its
// ps shows the target's sleep) and is attached to; its status shows in the
// pod's ephemeralContainerStatuses; once it exited it is not started again,
// also across a kubelet restart.
func testKubectlDebug(t *testing.T, c *controlplane.Cluster) {
	n := newAPINode(t, c)
	n.applyYAML(shellYAML())
	n.waitAPIPod("shell", podStartTimeout, "running", runningAndReady)

	stdinR, stdinW := io.Pipe()
	dbg := n.startKubectl(t, stdinR, "debug", "-i", "shell", "--image="+busyboxImage,
		"--image-pull-policy=Never", "--target=main", "--container=dbg", "--", "sh")
	// kubectl writes stdin only once it attached; until then the pipe blocks.
	go func() { _, _ = io.WriteString(stdinW, "ps -o pid,args\n") }()
	dbg.stdout.WaitFor(t, "sleep 3600", 60*time.Second) // the target's process, seen from the debug container
	go func() { _, _ = io.WriteString(stdinW, "exit 0\n"); _ = stdinW.Close() }()
	if code := dbg.wait(t, 30*time.Second); code != 0 {
		t.Errorf("kubectl debug exited %d: %s", code, dbg.stderr.String())
	}
	exited := func(p *v1.Pod) bool {
		es := p.Status.EphemeralContainerStatuses
		return len(es) == 1 && es[0].Name == "dbg" && es[0].State.Terminated != nil
	}
	p := n.waitAPIPod("shell", 30*time.Second, "the debug container's status terminated", exited)
	first := p.Status.EphemeralContainerStatuses[0]
	if first.State.Terminated.ExitCode != 0 || first.ContainerID == "" || first.ImageID == "" {
		t.Errorf("debug container status = %+v", first)
	}

	// A kubelet restart neither restarts it nor loses its status.
	if err := n.kubelet.stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	n.start()
	n.waitNodeReady(60 * time.Second)
	time.Sleep(3 * time.Second) // a few syncs of the pod
	p = n.waitAPIPod("shell", 30*time.Second, "still running with its debug container's status", func(p *v1.Pod) bool {
		return runningAndReady(p) && exited(p)
	})
	if got := p.Status.EphemeralContainerStatuses[0]; got.ContainerID != first.ContainerID || got.RestartCount != 0 {
		t.Errorf("after a kubelet restart the debug container is %s (restarts %d), want %s not restarted", got.ContainerID, got.RestartCount, first.ContainerID)
	}
	if ids := n.containers(true, labelContainerName+"=dbg"); len(ids) != 1 {
		t.Errorf("%d debug containers in Docker, want 1: %s", len(ids), fmt.Sprint(ids))
	}

	// With a finite stdin the container's output still arrives: the end of
	// kubectl's stdin must not cut the attach (Docker closes an attach's
	// output when its stdin ends unless the container's stdin is once-only).
	out, stderr, code := n.kubectlResult("ps -o pid,args\nexit 0\n", "debug", "-i", "shell", "--image="+busyboxImage,
		"--image-pull-policy=Never", "--target=main", "--container=dbg2", "--", "sh")
	if code != 0 || !strings.Contains(out, "sleep 3600") {
		t.Errorf("kubectl debug -i with a piped stdin: exit %d, stdout %q, stderr %q; want the target's sleep 3600", code, out, stderr)
	}
}
