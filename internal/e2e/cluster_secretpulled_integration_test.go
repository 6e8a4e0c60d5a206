//go:build linux

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/registry"
)

// testEnsureSecretPulledImages (issue 30 item 2): with
// KubeletEnsureSecretPulledImages (on by default, policy
// NeverVerifyPreloadedImages), a private image one namespace's pull secret
// pulled is not given to another namespace's pod without credentials, though
// it is on the node and the pod says IfNotPresent:
//   - the pod of namespace A with the secret pulls the image and runs; the
//     pull record on disk names its secret (upstream's file and format);
//   - a pod of namespace B without a secret must pull, and fails
//     (ErrImagePull or ImagePullBackOff); with Never it is refused
//     (ErrImageNeverPull);
//   - a pod of namespace B whose own secret holds the same credentials runs
//     without a pull ("already present on machine and can be accessed by the
//     pod"), and the record learns that secret.
func testEnsureSecretPulledImages(t *testing.T, c *controlplane.Cluster) {
	const user, pass = "pulled", "s3cret-pulled"
	n := newClusterNode(t, c)
	n.createNamespace()
	other := n.ns + "-b"
	n.deleteAtEnd("namespace/" + other)
	// The node removes the containers of n.ns's pods; these are the others'.
	n.teardown = append(n.teardown, func() { n.s.removeContainers(t, "io.kubernetes.pod.namespace="+other) })
	reg := registry.Start(t, user, pass)
	image := pushPrivateBusybox(t, n.node, reg, user, pass)
	name := strings.TrimSuffix(image, ":1")

	n.applyYAML("apiVersion: v1\nkind: Namespace\nmetadata: {name: " + other + "}\n")
	n.poll(3*time.Minute, "default ServiceAccount in "+other, func() (bool, string) {
		_, err := c.Client.CoreV1().ServiceAccounts(other).Get(context.Background(), "default", metav1.GetOptions{})
		return err == nil, errString(err)
	})
	for _, s := range []struct{ ns, name string }{{n.ns, "pull"}, {other, "copy"}} {
		n.kubectl("", "create", "secret", "docker-registry", s.name, "-n", s.ns, "--docker-server="+reg, "--docker-username="+user, "--docker-password="+pass)
	}
	pod := func(ns, podName, policy, secret string) string {
		y := strings.Replace(n.boundPodYAML(podName, 1, `[sleep, "3600"]`), "image: @IMAGE@", "image: "+image, 1)
		y = strings.Replace(y, "imagePullPolicy: Never", "imagePullPolicy: "+policy, 1)
		y = strings.Replace(y, "namespace: @NS@", "namespace: "+ns, 1)
		if secret != "" {
			y = strings.Replace(y, "spec:\n", "spec:\n  imagePullSecrets: [{name: "+secret+"}]\n", 1)
		}
		return y
	}
	n.start()
	n.waitNodeReady(90 * time.Second)

	n.applyYAML(pod(n.ns, "owner", "IfNotPresent", "pull"))
	n.waitAPIPod("owner", podStartTimeout, "running with the image its secret pulled", runningAndReady)
	secretUID := strings.TrimSpace(n.kubectl("", "get", "secret", "pull", "-n", n.ns, "-o", "jsonpath={.metadata.uid}"))
	record := n.pulledRecord(t, name)
	if !strings.Contains(record, `"credentialMapping":{"`+name+`":{"kubernetesSecrets":[{"uid":"`+secretUID+`","namespace":"`+n.ns+`","name":"pull","credentialHash":"`) {
		t.Errorf("pull record does not name the owner's secret:\n%s", record)
	}

	n.applyYAML(pod(other, "nosecret", "IfNotPresent", "") + "---\n" + pod(other, "never", "Never", ""))
	waitReason := func(podName string, reasons ...string) {
		n.poll(90*time.Second, "pod "+other+"/"+podName+" waiting with "+strings.Join(reasons, " or "), func() (bool, string) {
			p, err := c.Client.CoreV1().Pods(other).Get(context.Background(), podName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, cs := range p.Status.ContainerStatuses {
				if w := cs.State.Waiting; w != nil {
					for _, r := range reasons {
						if w.Reason == r {
							return true, ""
						}
					}
				}
				if cs.State.Running != nil {
					t.Fatalf("pod %s/%s runs an image another namespace's secret pulled", other, podName)
				}
			}
			return false, p.Status.String()
		})
	}
	waitReason("nosecret", "ErrImagePull", "ImagePullBackOff")
	waitReason("never", "ErrImageNeverPull")

	n.applyYAML(pod(other, "samecreds", "IfNotPresent", "copy"))
	n.poll(podStartTimeout, "pod "+other+"/samecreds running", func() (bool, string) {
		p, err := c.Client.CoreV1().Pods(other).Get(context.Background(), "samecreds", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return runningAndReady(p), p.Status.String()
	})
	want := `Container image "` + image + `" already present on machine and can be accessed by the pod`
	n.poll(30*time.Second, "event "+want, func() (bool, string) {
		evs, err := c.Client.CoreV1().Events(other).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=samecreds"})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Reason == "Pulled" && e.Message == want {
				return true, ""
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return false, strings.Join(seen, "\n")
	})
	if record := n.pulledRecord(t, name); !strings.Contains(record, `"namespace":"`+other+`","name":"copy"`) {
		t.Errorf("pull record did not learn the secret with the same credentials:\n%s", record)
	}
	if entries, _ := os.ReadDir(filepath.Join(n.rootDir, "image_manager", "pulling")); len(entries) != 0 {
		t.Errorf("pull intents left after the pulls ended: %v", entries)
	}
	body, code, err := n.get("/metrics")
	if err != nil || code != 200 {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	for _, want := range []string{
		`kubelet_imagemanager_image_mustpull_checks_total{result="credentialRecordFound"}`,
		`kubelet_imagemanager_image_mustpull_checks_total{result="mustAuthenticate"}`,
		`kubelet_image_manager_ensure_image_requests_total{present_locally="true",pull_policy="never",pull_required="true"}`,
		"kubelet_imagemanager_ondisk_pullintents 0",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	checkUpstreamMetrics(t, body, true)
}

// pulledRecord returns the one pull record on the node whose credential
// mapping names image (without tag), as upstream's kubelet writes it.
func (n *clusterNode) pulledRecord(t *testing.T, image string) string {
	t.Helper()
	dir := filepath.Join(n.rootDir, "image_manager", "pulled")
	var found []string
	n.poll(30*time.Second, "a pull record of "+image+" in "+dir, func() (bool, string) {
		found = found[:0]
		entries, err := os.ReadDir(dir)
		if err != nil {
			return false, err.Error()
		}
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err == nil && strings.Contains(string(data), `"`+image+`":`) {
				if !strings.HasPrefix(e.Name(), "sha256-") || !strings.HasPrefix(string(data), `{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1beta1",`) {
					t.Fatalf("record %s is not in upstream's format: %s", e.Name(), data)
				}
				found = append(found, string(data))
			}
		}
		return len(found) == 1, strings.Join(found, "\n")
	})
	return found[0]
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
