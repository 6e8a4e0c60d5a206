//go:build linux

package volumes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// clientObjects is the smallest client-go backed APIObjects: direct GETs and
// TokenRequests, no cache.
type clientObjects struct{ client kubernetes.Interface }

func (o clientObjects) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	return o.client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (o clientObjects) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	return o.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (o clientObjects) CreateToken(ctx context.Context, namespace, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return o.client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
}

// TestIntegrationObjectVolumes runs the volumes of an API pod the way the kubelet of
// its node does, with node credentials (Node authorizer, NodeRestriction): the
// kube-api-access projected volume gets a token the API server accepts, and a
// configMap update reaches the file on the next MountVolumes.
func TestIntegrationObjectVolumes(t *testing.T) {
	c := shared.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const nodeName = "node-volumes-it"
	pod := createVolumesPod(ctx, t, c, nodeName)

	root := t.TempDir()
	t.Cleanup(func() { detachAll(t, root) })
	m, err := New(Options{PodsDir: filepath.Join(root, "pods"), Allocatable: fixedAllocatable(testAllocatable),
		Objects: clientObjects{c.NodeClient(t, nodeName)}, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	// The Node authorizer learns about the pod from its informers: retry briefly.
	var infos map[string]VolumeInfo
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		infos, err = m.MountVolumes(ctx, pod)
		if err != nil {
			t.Logf("MountVolumes: %v", err)
		}
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("volumes never mounted: %v\n%s", err, c.LogTail("kube-apiserver", 20))
	}

	checkKubeAPIAccess(ctx, t, c, pod, infos[kubeAPIAccessName(t, pod)].HostPath)
	checkConfigMapUpdate(ctx, t, c.Client, m, pod, filepath.Join(infos["config"].HostPath, "greeting"))

	if err := m.UnmountVolumes(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if mps := mustMountPoints(t, root); len(mps) != 0 {
		t.Errorf("still mounted: %v", mps)
	}
}

// createVolumesPod creates a Node, a namespace volumes-it-xxxxx (waiting for its
// service account and kube-root-ca.crt), the configMap app-config and a pod bound
// to the node that mounts it; the ServiceAccount admission plugin adds
// kube-api-access-xxxxx. The node and the namespace go when the test ends.
func createVolumesPod(ctx context.Context, t *testing.T, c *controlplane.Cluster, nodeName string) *v1.Pod {
	t.Helper()
	admin := c.Client
	c.CreateNode(ctx, t, nil, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}})
	created, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "volumes-it-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns := created.Name
	t.Cleanup(func() {
		if err := admin.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
	waitForNamespaceSetup(ctx, t, admin, ns)
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "app-config"}, Data: map[string]string{"greeting": "hello"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := admin.CoreV1().Pods(ns).Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1.PodSpec{
			NodeName:   nodeName,
			Containers: []v1.Container{{Name: "app", Image: "busybox"}},
			Volumes:    []v1.Volume{configMapVolume("config", "app-config")},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// checkKubeAPIAccess checks the kube-api-access volume in dir: tmpfs, the cluster CA,
// the namespace, and a token the API server accepts for the pod's service account.
func checkKubeAPIAccess(ctx context.Context, t *testing.T, c *controlplane.Cluster, pod *v1.Pod, dir string) {
	t.Helper()
	if fs := mustFSType(t, dir); fs != "tmpfs" {
		t.Errorf("%s on %q, want tmpfs", dir, fs)
	}
	caPEM, err := os.ReadFile(c.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "ca.crt")); strings.TrimSpace(got) != strings.TrimSpace(string(caPEM)) {
		t.Errorf("ca.crt differs from the cluster CA:\n%s", got)
	}
	if got := readFile(t, filepath.Join(dir, "namespace")); got != pod.Namespace {
		t.Errorf("namespace = %q, want %s", got, pod.Namespace)
	}
	reviewToken(ctx, t, c.Client, readFile(t, filepath.Join(dir, "token")),
		"system:serviceaccount:"+pod.Namespace+":default", pod.Name)
}

// checkConfigMapUpdate updates app-config and checks that the next MountVolumes
// rewrites file.
func checkConfigMapUpdate(ctx context.Context, t *testing.T, admin kubernetes.Interface, m *Manager, pod *v1.Pod, file string) {
	t.Helper()
	if got := readFile(t, file); got != "hello" {
		t.Fatalf("greeting = %q", got)
	}
	cm, err := admin.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, "app-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["greeting"] = "bonjour"
	if _, err := admin.CoreV1().ConfigMaps(pod.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.MountVolumes(ctx, pod); err != nil {
		t.Fatalf("MountVolumes after the update: %v", err)
	}
	if got := readFile(t, file); got != "bonjour" {
		t.Errorf("greeting after the update = %q, want bonjour", got)
	}
}

// waitForNamespaceSetup waits for the controller-manager to create the namespace's
// "default" service account and kube-root-ca.crt configMap.
func waitForNamespaceSetup(ctx context.Context, t *testing.T, admin kubernetes.Interface, ns string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, err := admin.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, nil
		}
		_, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("namespace %s: no default service account or kube-root-ca.crt: %v", ns, err)
	}
}

// kubeAPIAccessName returns the name of the projected volume the ServiceAccount
// admission plugin added.
func kubeAPIAccessName(t *testing.T, pod *v1.Pod) string {
	t.Helper()
	for _, vol := range pod.Spec.Volumes {
		if strings.HasPrefix(vol.Name, "kube-api-access-") && vol.Projected != nil {
			return vol.Name
		}
	}
	t.Fatalf("pod has no kube-api-access volume: %+v", pod.Spec.Volumes)
	return ""
}

// reviewToken checks with a TokenReview that the API server accepts token as user,
// bound to the pod.
func reviewToken(ctx context.Context, t *testing.T, admin kubernetes.Interface, token, user, podName string) {
	t.Helper()
	tr, err := admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenReview: %v", err)
	}
	if !tr.Status.Authenticated || tr.Status.User.Username != user {
		t.Fatalf("TokenReview: authenticated %v as %q (error %q), want %s", tr.Status.Authenticated, tr.Status.User.Username, tr.Status.Error, user)
	}
	if got := tr.Status.User.Extra["authentication.kubernetes.io/pod-name"]; len(got) != 1 || got[0] != podName {
		t.Errorf("token bound to pod %v, want %s", got, podName)
	}
}
