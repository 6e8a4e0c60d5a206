//go:build linux

package libdocker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/dockerd"
)

// testBusybox is the image the integration tests run (scripts/build-images.sh).
const testBusybox = "kubelet-dockershim/busybox:latest"

// TestIntegrationStopThenList: once StopContainer returns, the daemon's list
// shows the container exited (Docker 26 answered the stop before its list
// was updated, so a sandbox stopped by the kubelet stayed READY in the next
// ListPodSandbox).
func TestIntegrationStopThenList(t *testing.T) {
	c, err := New(Options{Endpoint: dockerd.Endpoint()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 5 {
		id, err := c.CreateContainer(ctx, fmt.Sprintf("libdocker-stop-%d-%d", time.Now().UnixNano(), i),
			&ContainerConfig{Image: testBusybox, Cmd: []string{"sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.1; done"},
				Labels: map[string]string{"io.kubelet-dockershim.test": "libdocker"}},
			&HostConfig{NetworkMode: "none"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.RemoveContainer(context.Background(), id) })
		if err := c.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := c.StopContainer(ctx, id, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		l, err := c.ListContainers(ctx, ListOptions{All: true, Filters: NewFilterArgs(FilterArg("id", id))})
		if err != nil || len(l) != 1 {
			t.Fatalf("list: %d containers, %v", len(l), err)
		}
		if l[0].State != "exited" {
			t.Fatalf("stop %d: the list says %q right after StopContainer, want exited", i, l[0].State)
		}
	}
}
