//go:build linux

package podsource

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// apiWait bounds how long an integration test waits for an expected set; after an API
// server restart the reflector retries with a backoff of up to 30s (plus jitter).
const apiWait = 90 * time.Second

// createNode registers a Node object (so that the pod GC does not treat its pods as
// orphans) and deletes it when the test ends.
func createNode(ctx context.Context, t *testing.T, c *controlplane.Cluster, name string) {
	t.Helper()
	c.CreateNode(ctx, t, nil, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// createPod creates a pod bound to node in the default namespace (no scheduler involved)
// and force-deletes it when the test ends.
func createPod(ctx context.Context, t *testing.T, c *controlplane.Cluster, name, node string, annotations map[string]string) *v1.Pod {
	t.Helper()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: annotations},
		Spec: v1.PodSpec{
			NodeName:                     node,
			AutomountServiceAccountToken: new(false),
			Containers:                   []v1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	created, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	t.Cleanup(func() { deletePod(context.Background(), t, c, name, 0) })
	return created
}

func deletePod(ctx context.Context, t *testing.T, c *controlplane.Cluster, name string, grace int64) {
	t.Helper()
	err := c.Client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete pod %s: %v", name, err)
	}
}

// runAPISource runs a Source with only the API source until the test ends.
func runAPISource(t *testing.T, client kubernetes.Interface, node string) *Source {
	t.Helper()
	s, err := New(Options{NodeName: node, Client: client, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
	return s
}

// awaitSet reads updates until want accepts one, checking every update with invariant
// first. It returns the accepted update's pods by name.
func awaitSet(t *testing.T, s *Source, what string, invariant func(u kubecontainer.PodUpdate) error, want func(pods map[string]*v1.Pod) bool) map[string]*v1.Pod {
	t.Helper()
	deadline := time.After(apiWait)
	var last []string
	for {
		select {
		case u := <-s.Updates():
			if u.Op != kubecontainer.SET || u.Source != kubecontainer.APISource {
				t.Fatalf("update %v from %q, want SET from %q", u.Op, u.Source, kubecontainer.APISource)
			}
			if invariant != nil {
				if err := invariant(u); err != nil {
					t.Fatalf("while waiting for %s: %v", what, err)
				}
			}
			pods := map[string]*v1.Pod{}
			for _, p := range u.Pods {
				if p.Annotations[kubecontainer.ConfigSourceAnnotationKey] != kubecontainer.APISource {
					t.Fatalf("pod %s has config.source %q", p.Name, p.Annotations[kubecontainer.ConfigSourceAnnotationKey])
				}
				pods[p.Name] = p
			}
			if want(pods) {
				return pods
			}
			last = podKeys(u.Pods)
		case <-deadline:
			t.Fatalf("no set with %s within %v; last set %v", what, apiWait, last)
		}
	}
}

func hasPods(names ...string) func(map[string]*v1.Pod) bool {
	return func(pods map[string]*v1.Pod) bool {
		if len(pods) != len(names) {
			return false
		}
		for _, n := range names {
			if pods[n] == nil {
				return false
			}
		}
		return true
	}
}

// onlyNode fails a set that holds a pod bound to another node.
func onlyNode(node string) func(u kubecontainer.PodUpdate) error {
	return func(u kubecontainer.PodUpdate) error {
		for _, p := range u.Pods {
			if p.Spec.NodeName != node {
				return fmt.Errorf("set %v holds pod %s of node %q", podKeys(u.Pods), p.Name, p.Spec.NodeName)
			}
		}
		return nil
	}
}

// TestIntegrationAPISourceLifecycle follows pods bound to a node through create, a
// graceful delete (deletionTimestamp) and the final delete, listing with the node's own
// credentials; pods of another node never appear.
func TestIntegrationAPISourceLifecycle(t *testing.T) {
	c := shared.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node, other := "podsource-life", "podsource-life-other"
	createNode(ctx, t, c, node)
	createNode(ctx, t, c, other)
	createPod(ctx, t, c, "elsewhere", other, nil)

	s := runAPISource(t, c.NodeClient(t, node), node)
	check := onlyNode(node)
	awaitSet(t, s, "no pods", check, hasPods())
	if !s.SeenAllSources() {
		t.Error("SeenAllSources false after the first set")
	}

	web := createPod(ctx, t, c, "web", node, nil)
	pods := awaitSet(t, s, "web", check, hasPods("web"))
	if got := pods["web"]; got.UID != web.UID || got.Namespace != "default" || got.Spec.NodeName != node {
		t.Errorf("web: uid %s ns %s node %s, want uid %s", got.UID, got.Namespace, got.Spec.NodeName, web.UID)
	}

	mirrorName := "static-" + node
	mirror := createPod(ctx, t, c, mirrorName, node, map[string]string{
		kubecontainer.ConfigMirrorAnnotationKey: "0123abcd", kubecontainer.ConfigHashAnnotationKey: "0123abcd",
	})
	pods = awaitSet(t, s, "the mirror pod", check, hasPods("web", mirrorName))
	if got := pods[mirrorName]; got.UID != mirror.UID || got.Annotations[kubecontainer.ConfigMirrorAnnotationKey] != "0123abcd" {
		t.Errorf("mirror pod: uid %s annotations %v", got.UID, got.Annotations)
	}

	deletePod(ctx, t, c, "web", 30)
	awaitSet(t, s, "web terminating", check, func(pods map[string]*v1.Pod) bool {
		p := pods["web"]
		return p != nil && p.DeletionTimestamp != nil && p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds == 30
	})

	deletePod(ctx, t, c, "web", 0)
	awaitSet(t, s, "web removed", check, hasPods(mirrorName))
}

// TestIntegrationAPISourceSurvivesAPIServerRestart stops and restarts the API server under
// a running source: no set without the existing pod is sent in between, and a pod
// created after the restart arrives.
func TestIntegrationAPISourceSurvivesAPIServerRestart(t *testing.T) {
	c := shared.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	node := "podsource-restart"
	createNode(ctx, t, c, node)
	createPod(ctx, t, c, "before", node, nil)

	s := runAPISource(t, c.Client, node)
	awaitSet(t, s, "before", onlyNode(node), hasPods("before"))

	t.Logf("%s stopping the API server", time.Now().Format(time.StampMilli))
	if err := c.StopAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s API server stopped", time.Now().Format(time.StampMilli))
	time.Sleep(3 * time.Second) // let the reflector lose its watch and fail to reconnect
	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatalf("%v\n%s", err, c.LogTail("kube-apiserver", 30))
	}
	t.Logf("%s API server started", time.Now().Format(time.StampMilli))
	createPod(ctx, t, c, "after", node, nil)

	keepsBefore := func(u kubecontainer.PodUpdate) error {
		if !slices.ContainsFunc(u.Pods, func(p *v1.Pod) bool { return p.Name == "before" }) {
			return fmt.Errorf("spurious removal: set %v lacks pod before", podKeys(u.Pods))
		}
		return onlyNode(node)(u)
	}
	awaitSet(t, s, "before and after", keepsBefore, hasPods("before", "after"))
}
