//go:build linux

package dockershim

import (
	"context"
	"os/exec"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestIntegrationContainerEvents follows a real sandbox container through Docker's
// event stream: created, started, stopped and deleted, with the sandbox status
// attached while the sandbox exists.
func TestIntegrationContainerEvents(t *testing.T) {
	fixtureEnsureImage(t)
	s := fixtureService(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	defer func() { stop(); s.events.Wait() }()
	stream := &eventsFakeStream{ctx: runCtx, sent: make(chan *runtimeapi.ContainerEventResponse, 64)}
	go func() { _ = s.GetContainerEvents(&runtimeapi.GetEventsRequest{}, stream) }()
	s.events.Start(runCtx)

	// next returns the next event of container id, or nil after wait.
	next := func(id string, wait time.Duration) *runtimeapi.ContainerEventResponse {
		timeout := time.After(wait)
		for {
			select {
			case r := <-stream.sent:
				if r.ContainerId == id {
					return r
				}
			case <-timeout:
				return nil
			}
		}
	}
	create := []string{"create", "--label", fixtureLabel, "--label", labelType + "=" + typeSandbox,
		"--label", labelManaged + "=true", "--label", "app=events", fixtureImage, "sleep", "600"}
	// The broker subscribes asynchronously: retry until a creation is seen.
	var id string
	var r *runtimeapi.ContainerEventResponse
	for attempt := 0; attempt < 5 && r == nil; attempt++ {
		id = fixtureDocker(t, create...)
		cid := id
		t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", cid).Run() })
		if r = next(id, 2*time.Second); r == nil {
			fixtureDocker(t, "rm", "-f", id)
		}
	}
	if r == nil || r.ContainerEventType != runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT {
		t.Fatalf("first event = %v, want CREATED", r)
	}
	if r.PodSandboxStatus.GetId() != id || r.CreatedAt == 0 {
		t.Errorf("created event = %v, want the sandbox status and a time", r)
	}
	fixtureDocker(t, "start", id)
	if r = next(id, 10*time.Second); r.GetContainerEventType() != runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT ||
		r.PodSandboxStatus.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY || r.PodSandboxStatus.GetLabels()["app"] != "events" {
		t.Errorf("after start: %v, want STARTED with a ready sandbox", r)
	}
	fixtureDocker(t, "rm", "-f", id)
	if r = next(id, 10*time.Second); r.GetContainerEventType() != runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
		t.Errorf("after kill: %v, want STOPPED", r)
	}
	if r = next(id, 10*time.Second); r.GetContainerEventType() != runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT ||
		r.PodSandboxStatus.GetId() != id || r.PodSandboxStatus.GetLabels()["app"] != "events" {
		t.Errorf("after removal: %v, want DELETED with a status rebuilt from the event", r)
	}
}
