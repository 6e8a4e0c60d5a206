package shim

import (
	"context"
	"testing"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
)

// dialTimeout bounds how long Dial waits for the socket and the first answer.
const dialTimeout = time.Minute

// Dial waits for the socket and returns cri-client runtime and image clients
// with timeout per call; they are closed when the test ends. The test fails
// when the shim does not serve within a minute or exits.
func (i *Instance) Dial(t testing.TB, timeout time.Duration) (internalapi.RuntimeService, internalapi.ImageManagerService) {
	t.Helper()
	ctx, cancel := context.WithTimeout(i.ctx, dialTimeout)
	defer cancel()
	if err := i.WaitReady(ctx); err != nil {
		t.Fatalf("%v\n%s", err, i.Output())
	}
	rt, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(i.Endpoint).WithConnectionTimeout(timeout).Build(ctx)
	if err != nil {
		t.Fatalf("runtime client: %v", err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	images, err := remote.NewRemoteImageServiceBuilder().WithEndpoint(i.Endpoint).WithConnectionTimeout(timeout).Build(ctx)
	if err != nil {
		t.Fatalf("image client: %v", err)
	}
	t.Cleanup(func() { _ = images.Close(context.Background()) })
	return rt, images
}

// PodUIDLabel is the sandbox label the kubelet keeps a pod's UID in.
const PodUIDLabel = "io.kubernetes.pod.uid"

// RemovePodSandboxes stops and removes every sandbox of the pod with uid (and
// so its containers), for cleanups; failures are logged.
func RemovePodSandboxes(t testing.TB, rt internalapi.RuntimeService, uid string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{PodUIDLabel: uid}})
	if err != nil {
		t.Logf("cleanup: list the sandboxes of pod %s: %v", uid, err)
		return
	}
	for _, sb := range sbs {
		_ = rt.StopPodSandbox(ctx, sb.Id)
		if err := rt.RemovePodSandbox(ctx, sb.Id); err != nil {
			t.Logf("cleanup: remove sandbox %s: %v", sb.Id, err)
		}
	}
}
