//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/testca"
)

// Flags every cluster node gets (cluster DNS of the test cluster: nothing
// answers at 10.96.0.10, the tests only read resolv.conf).
const (
	clusterDNS    = "10.96.0.10"
	clusterDomain = "cluster.local"
)

// TestIntegrationCluster runs the kubelet binary against a real control plane
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler of
// internal/testutil/controlplane), started once for all its subtests and
// stopped when they are done. The subtests run one after the other, each with
// a node of its own (removed from the cluster at its end, so the scheduler only
// ever sees the node of the running subtest) and a namespace of its own.
func TestIntegrationCluster(t *testing.T) {
	runClusterCases(t, []clusterCase{
		{desc: "NodeRegistersWithLease", run: testNodeRegistersWithLease},
		{desc: "TLSBootstrap", run: testTLSBootstrap},
		{desc: "DeploymentDockerMode", run: testDeploymentDockerMode},
		{desc: "DeploymentRemoteMode", run: testDeploymentRemoteMode},
		{desc: "PodNetwork", run: testPodNetwork},
		{desc: "TokenConfigMapSecretEnvDNS", run: testTokenConfigMapSecretEnvDNS},
		{desc: "PodCertificate", run: testPodCertificate},
		{desc: "RuntimeClass", run: testRuntimeClass},
		{desc: "CredentialProviderToken", run: testCredentialProviderToken},
		{desc: "EnsureSecretPulledImages", run: testEnsureSecretPulledImages},
		{desc: "ProbesHooksSidecars", run: testProbesHooksSidecars},
		{desc: "GracefulDeletion", run: testGracefulDeletion},
		{desc: "PersistentVolumes", run: testPersistentVolumes},
		{desc: "DevicePlugins", run: testDevicePlugins},
		{desc: "TopologyManager", run: testTopologyManager},
		{desc: "MemoryManager", run: testMemoryManager},
		{desc: "CSI", run: testCSI},
		{desc: "CSIBlockAndExpansion", run: testCSIBlockAndExpansion},
		{desc: "CSIReadWriteManyExpansion", run: testCSIReadWriteManyExpansion},
		{desc: "MirrorPod", run: testMirrorPod},
		{desc: "APIServerOutage", run: testAPIServerOutage},
		{desc: "NodeAllocatable", run: testNodeAllocatable},
		{desc: "InPlaceResize", run: testInPlaceResize},
		{desc: "InPlaceResizePodLevel", run: testInPlaceResizePodLevel},
		{desc: "Eviction", run: testEviction},
		{desc: "DiskPressure", run: testDiskPressure},
		{desc: "PIDPressure", run: testPIDPressure},
		{desc: "ReadinessGates", run: testReadinessGates},
		{desc: "PodOSRejection", run: testPodOSRejection},
		{desc: "RestartAllContainers", run: testRestartAllContainers},
	})
}

// clusterCase is one subtest run against the shared control plane.
type clusterCase struct {
	desc string
	run  func(t *testing.T, c *controlplane.Cluster)
}

// runClusterCases starts a control plane (stopped when t ends) and runs the
// cases one after the other against it, logging how long each took.
func runClusterCases(t *testing.T, cases []clusterCase) {
	requireSuite(t)
	c := startCluster(t)
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			start := time.Now()
			tc.run(t, c)
			t.Logf("%s took %s", tc.desc, time.Since(start).Round(time.Second))
		})
	}
}

// startCluster starts a control plane on a temp dir and stops it when tb ends.
// It fails (never skips) when the control plane cannot start.
func startCluster(tb testing.TB) *controlplane.Cluster {
	tb.Helper()
	dir, err := os.MkdirTemp("", "e2ecp")
	if err != nil {
		tb.Fatal(err)
	}
	// A cold build of the control plane binaries takes up to 13 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := controlplane.Start(ctx, dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		tb.Fatalf("start the control plane: %v", err)
	}
	tb.Logf("control plane up in %s at %s", time.Since(start).Round(time.Millisecond), c.APIServer)
	tb.Cleanup(func() {
		if tb.Failed() {
			for _, comp := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
				tb.Logf("--- tail of the %s log:\n%s", comp, c.LogTail(comp, 20))
			}
		}
		if err := c.Stop(); err != nil {
			tb.Errorf("stop the control plane: %v", err)
		}
		_ = os.RemoveAll(dir)
	})
	return c
}

// clusterNode is a node of newNode joined to the cluster with a client
// certificate of its own (or, after useBootstrap, through TLS bootstrap). Its
// namespace n.ns is created in the API by createNamespace; the Node object and
// the namespace are deleted once the kubelet has stopped.
type clusterNode struct {
	*node
	c          *controlplane.Cluster
	kubeconfig string // --kubeconfig
}

// newClusterNode prepares a docker-mode node with --kubeconfig (a node client
// certificate signed by the cluster CA), --node-ip=127.0.0.1 and the cluster DNS
// flags. It starts nothing.
func newClusterNode(t testing.TB, c *controlplane.Cluster) *clusterNode {
	t.Helper()
	n := &clusterNode{node: newNode(t), c: c}
	n.kubeconfig = filepath.Join(n.dir, "kubelet.conf")
	certFile, keyFile := c.CA(t).IssueFiles(t, n.dir, "node", testca.Cert{
		CommonName:    "system:node:" + n.name,
		Organizations: []string{"system:nodes"},
	})
	writeKubeconfig(t, n.kubeconfig, c.APIServer, c.CAFile, certFile, keyFile)
	n.setClusterFlags()
	// Teardown runs after the kubelet stopped: nothing re-registers the node.
	n.teardown = append(n.teardown, n.removeFromCluster)
	return n
}

// setClusterFlags sets the flags of a cluster node (kubeconfig last, so that
// useBootstrap can add to it).
func (n *clusterNode) setClusterFlags(more ...string) {
	n.extra = append([]string{
		"--node-ip=127.0.0.1",
		"--cluster-dns=" + clusterDNS,
		"--cluster-domain=" + clusterDomain,
		"--kubeconfig=" + n.kubeconfig,
	}, more...)
}

// useBootstrap makes the kubelet join through TLS bootstrap: --kubeconfig does
// not exist yet and --bootstrap-kubeconfig carries the cluster's bootstrap token.
func (n *clusterNode) useBootstrap() {
	n.t.Helper()
	n.kubeconfig = filepath.Join(n.dir, "bootstrapped.conf")
	n.setClusterFlags("--bootstrap-kubeconfig=" + n.c.BootstrapKubeconfig)
}

// removeFromCluster force-deletes the test's API pods, its namespace and its
// Node (without waiting: the namespace controller and pod GC finish the job).
func (n *clusterNode) removeFromCluster() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli := n.c.Client
	zero := int64(0)
	if err := cli.CoreV1().Pods(n.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
		n.t.Logf("delete the pods of %s: %v", n.ns, err)
	}
	if err := cli.CoreV1().Namespaces().Delete(ctx, n.ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		n.t.Logf("delete namespace %s: %v", n.ns, err)
	}
	if err := cli.CoreV1().Nodes().Delete(ctx, n.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		n.t.Logf("delete node %s: %v", n.name, err)
	}
}

// createNamespace creates n.ns and waits for its default ServiceAccount and
// kube-root-ca.crt ConfigMap (pods need both).
func (n *clusterNode) createNamespace() {
	n.t.Helper()
	ctx := context.Background()
	cli := n.c.Client
	if _, err := cli.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n.ns}}, metav1.CreateOptions{}); err != nil {
		n.t.Fatalf("create namespace %s: %v", n.ns, err)
	}
	// After an API server restart (APIServerOutage) the controller-manager
	// may take about a minute to catch up and create them.
	n.poll(3*time.Minute, "default ServiceAccount and kube-root-ca.crt in "+n.ns, func() (bool, string) {
		if _, err := cli.CoreV1().ServiceAccounts(n.ns).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		if _, err := cli.CoreV1().ConfigMaps(n.ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// poll calls cond every 300 ms until it returns true. It fails after timeout
// with cond's last state, or at once when the kubelet (if started) exits.
func (n *clusterNode) poll(timeout time.Duration, what string, cond func() (bool, string)) {
	n.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if n.kubelet != nil && n.kubelet.exited() {
			n.t.Fatalf("kubelet exited (%v) while waiting for %s; last state: %s", n.kubelet.err, what, state)
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("%s: not within %s; last state: %s", what, timeout, state)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// kubectl runs kubectl with the admin kubeconfig and fails the test on error.
func (n *clusterNode) kubectl(stdin string, args ...string) string {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := n.c.KubectlRun(ctx, stdin, args...)
	if err != nil {
		n.t.Fatal(err)
	}
	return out
}

// apiNode gets the Node object.
func (n *clusterNode) apiNode() (*v1.Node, error) {
	return n.c.Client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
}

// nodeCondition returns the node's condition of type typ (nil if missing).
func nodeCondition(node *v1.Node, typ v1.NodeConditionType) *v1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == typ {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// waitNodeReady waits until the Node exists with Ready=True and returns it.
func (n *clusterNode) waitNodeReady(timeout time.Duration) *v1.Node {
	n.t.Helper()
	var node *v1.Node
	n.poll(timeout, "node "+n.name+" registered and Ready", func() (bool, string) {
		got, err := n.apiNode()
		if err != nil {
			return false, err.Error()
		}
		node = got
		cond := nodeCondition(got, v1.NodeReady)
		if cond == nil || cond.Status != v1.ConditionTrue {
			return false, fmt.Sprintf("Ready condition %+v", cond)
		}
		return true, ""
	})
	return node
}

// apiPod gets a pod of the test's namespace.
func (n *clusterNode) apiPod(name string) (*v1.Pod, error) {
	return n.c.Client.CoreV1().Pods(n.ns).Get(context.Background(), name, metav1.GetOptions{})
}

// waitAPIPod polls the API until pod name of n.ns satisfies cond and returns it.
func (n *clusterNode) waitAPIPod(name string, timeout time.Duration, what string, cond func(p *v1.Pod) bool) *v1.Pod {
	n.t.Helper()
	var pod *v1.Pod
	n.poll(timeout, "pod "+n.ns+"/"+name+": "+what, func() (bool, string) {
		p, err := n.apiPod(name)
		if err != nil {
			return false, err.Error()
		}
		pod = p
		return cond(p), podsJSON([]v1.Pod{*p})
	})
	return pod
}

// waitAPIPodGone polls the API until pod name of n.ns (with uid, if given) is gone.
func (n *clusterNode) waitAPIPodGone(name, uid string, timeout time.Duration) {
	n.t.Helper()
	n.poll(timeout, "pod "+n.ns+"/"+name+" deleted from the API", func() (bool, string) {
		p, err := n.apiPod(name)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		if uid != "" && string(p.UID) != uid {
			return true, ""
		}
		return false, fmt.Sprintf("deletionTimestamp %v %s", p.DeletionTimestamp, podsJSON([]v1.Pod{*p}))
	})
}

// applyYAML applies objects with kubectl in n.ns; @NS@ and @IMAGE@ are replaced.
func (n *clusterNode) applyYAML(body string) {
	n.t.Helper()
	body = strings.NewReplacer("@NS@", n.ns, "@IMAGE@", busyboxImage).Replace(body)
	n.kubectl(body, "apply", "-f", "-")
}

// podYAML is a pod of n.ns for applyYAML: one container, main, of the busybox
// image running command (a YAML flow sequence), with grace seconds of
// termination grace; each of containerFields is one more field of the
// container, such as "stdin: true".
func podYAML(name string, grace int, command string, containerFields ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: @NS@}
spec:
  terminationGracePeriodSeconds: %d
  containers:
  - name: main
    image: @IMAGE@
    imagePullPolicy: Never
    command: %s
`, name, grace, command)
	for _, f := range containerFields {
		b.WriteString("    " + f + "\n")
	}
	return b.String()
}

// waitLog waits until the CRI log of a container of p holds want and returns it.
func (n *clusterNode) waitLog(p *v1.Pod, container, want string, timeout time.Duration) string {
	n.t.Helper()
	var log string
	n.poll(timeout, fmt.Sprintf("log of %s/%s holds %q", p.Name, container, want), func() (bool, string) {
		var err error
		log, err = n.podLog(p, container, 0)
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(log, want), log
	})
	return log
}

// writeKubeconfig writes a kubeconfig with a client certificate.
func writeKubeconfig(t testing.TB, path, server, caFile, certFile, keyFile string) {
	t.Helper()
	cfg := map[string]any{
		"apiVersion":      "v1",
		"kind":            "Config",
		"clusters":        []any{map[string]any{"name": "e2e", "cluster": map[string]any{"server": server, "certificate-authority": caFile}}},
		"users":           []any{map[string]any{"name": "node", "user": map[string]any{"client-certificate": certFile, "client-key": keyFile}}},
		"contexts":        []any{map[string]any{"name": "e2e", "context": map[string]any{"cluster": "e2e", "user": "node"}}},
		"current-context": "e2e",
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}
