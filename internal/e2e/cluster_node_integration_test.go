//go:build linux

package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

const (
	mirrorAnnotation = "kubernetes.io/config.mirror"
	nodeLeaseNS      = "kube-node-lease"
)

// testNodeRegistersWithLease: the node registers with the upstream labels, its
// addresses, node info and capacity, becomes Ready, and renews its Lease in
// kube-node-lease.
func testNodeRegistersWithLease(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.start()
	start := time.Now()
	node := n.waitNodeReady(60 * time.Second)
	t.Logf("node Ready %s after the kubelet was healthy", time.Since(start).Round(time.Millisecond))

	for k, want := range map[string]string{
		"kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": runtime.GOARCH,
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": runtime.GOARCH,
	} {
		if got := node.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	addrs := map[v1.NodeAddressType]string{}
	for _, a := range node.Status.Addresses {
		addrs[a.Type] = a.Address
	}
	if addrs[v1.NodeInternalIP] != "127.0.0.1" || addrs[v1.NodeHostName] != n.name {
		t.Errorf("addresses %v, want InternalIP 127.0.0.1 and Hostname %s", node.Status.Addresses, n.name)
	}
	info := node.Status.NodeInfo
	if !strings.HasPrefix(info.ContainerRuntimeVersion, "docker://") || info.KubeletVersion == "" || info.KernelVersion == "" ||
		info.OSImage == "" || info.OperatingSystem != "linux" || info.Architecture != runtime.GOARCH {
		t.Errorf("nodeInfo %+v", info)
	}
	for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourcePods, v1.ResourceEphemeralStorage} {
		capQ, ok1 := node.Status.Capacity[r]
		allocQ, ok2 := node.Status.Allocatable[r]
		if !ok1 || !ok2 || capQ.IsZero() || allocQ.Cmp(capQ) > 0 {
			t.Errorf("%s: capacity %v allocatable %v", r, node.Status.Capacity[r], node.Status.Allocatable[r])
		}
	}
	for _, typ := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		if cond := nodeCondition(node, typ); cond == nil || cond.Status != v1.ConditionFalse {
			t.Errorf("condition %s = %+v, want False", typ, cond)
		}
	}
	if ep := node.Status.DaemonEndpoints.KubeletEndpoint.Port; int(ep) != n.apiPort {
		t.Errorf("daemonEndpoints port %d, want --port %d", ep, n.apiPort)
	}

	lease := n.waitLease(30*time.Second, nil)
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != n.name {
		t.Errorf("lease holderIdentity %v, want %s", lease.Spec.HolderIdentity, n.name)
	}
	if lease.Spec.LeaseDurationSeconds == nil || *lease.Spec.LeaseDurationSeconds != 40 {
		t.Errorf("leaseDurationSeconds %v, want 40", lease.Spec.LeaseDurationSeconds)
	}
	if refs := lease.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].Name != n.name || refs[0].UID != node.UID {
		t.Errorf("lease ownerReferences %+v, want the Node %s (uid %s)", refs, n.name, node.UID)
	}
	first := lease.Spec.RenewTime.Time
	renewed := n.waitLease(25*time.Second, func(l *coordinationv1.Lease) bool { return l.Spec.RenewTime.Time.After(first) })
	t.Logf("lease renewed: %s -> %s", first.Format(time.RFC3339Nano), renewed.Spec.RenewTime.Format(time.RFC3339Nano))
}

// waitLease waits for the node's Lease (satisfying cond, if given).
func (n *clusterNode) waitLease(timeout time.Duration, cond func(*coordinationv1.Lease) bool) *coordinationv1.Lease {
	n.t.Helper()
	var lease *coordinationv1.Lease
	n.poll(timeout, "lease "+nodeLeaseNS+"/"+n.name, func() (bool, string) {
		l, err := n.c.Client.CoordinationV1().Leases(nodeLeaseNS).Get(context.Background(), n.name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		lease = l
		if l.Spec.RenewTime == nil {
			return false, "no renewTime"
		}
		return cond == nil || cond(l), fmt.Sprintf("renewTime %s", l.Spec.RenewTime.Format(time.RFC3339Nano))
	})
	return lease
}

// testTLSBootstrap: with only the bootstrap token, the kubelet gets a client
// certificate signed by the cluster (CN system:node:<name>, O system:nodes)
// into <root-dir>/pki, writes --kubeconfig and registers with it.
func testTLSBootstrap(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.useBootstrap()
	n.start()
	n.waitNodeReady(90 * time.Second)

	current := filepath.Join(n.rootDir, "pki", "kubelet-client-current.pem")
	data, err := os.ReadFile(current)
	if err != nil {
		t.Fatalf("bootstrapped client certificate: %v", err)
	}
	var cert *x509.Certificate
	hasKey := false
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		switch {
		case b.Type == "CERTIFICATE" && cert == nil:
			if cert, err = x509.ParseCertificate(b.Bytes); err != nil {
				t.Fatalf("parse %s: %v", current, err)
			}
		case strings.HasSuffix(b.Type, "PRIVATE KEY"):
			hasKey = true
		}
	}
	if cert == nil || !hasKey {
		t.Fatalf("%s holds no certificate and key (certificate %v, key %v)", current, cert != nil, hasKey)
	}
	roots := x509.NewCertPool()
	roots.AddCert(c.CA(t).Cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the bootstrapped certificate does not verify against the cluster CA for client auth: %v", err)
	}
	if cert.Subject.CommonName != "system:node:"+n.name || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("certificate subject %v, want CN=system:node:%s O=system:nodes", cert.Subject, n.name)
	}

	kc, err := clientcmd.LoadFromFile(n.kubeconfig)
	if err != nil {
		t.Fatalf("the kubeconfig written by the bootstrap: %v", err)
	}
	ctx := kc.Contexts[kc.CurrentContext]
	if ctx == nil || kc.Clusters[ctx.Cluster] == nil || kc.AuthInfos[ctx.AuthInfo] == nil {
		t.Fatalf("kubeconfig %s has no usable current context: %+v", n.kubeconfig, kc)
	}
	if srv := kc.Clusters[ctx.Cluster].Server; srv != c.APIServer {
		t.Errorf("kubeconfig server %q, want %q", srv, c.APIServer)
	}
	if auth := kc.AuthInfos[ctx.AuthInfo]; auth.ClientCertificate != current || auth.ClientKey != current {
		t.Errorf("kubeconfig client cert/key %q/%q, want %s", auth.ClientCertificate, auth.ClientKey, current)
	}

	csrs, err := c.Client.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, csr := range csrs.Items {
		if strings.HasPrefix(csr.Spec.Username, "system:bootstrap:") && csr.Spec.SignerName == "kubernetes.io/kube-apiserver-client-kubelet" &&
			len(csr.Status.Certificate) > 0 && csrIsFor(csr.Spec.Request, n.name) {
			found = true
		}
	}
	if !found {
		t.Errorf("no signed CSR of a bootstrap token for system:node:%s among %d CSRs", n.name, len(csrs.Items))
	}
}

// csrIsFor reports whether a PEM CSR asks for CN system:node:<name>.
func csrIsFor(request []byte, name string) bool {
	b, _ := pem.Decode(request)
	if b == nil {
		return false
	}
	req, err := x509.ParseCertificateRequest(b.Bytes)
	return err == nil && req.Subject.CommonName == "system:node:"+name
}

const mirrorSpec = `  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sleep", "3600"]
`

// testMirrorPod: a static pod shows up in the API as a mirror pod, which is
// recreated when deleted (the pod keeps running) and removed with the manifest.
func testMirrorPod(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.createNamespace()
	n.start()
	node := n.waitNodeReady(60 * time.Second)
	n.writeManifest("static.yaml", manifest("static", mirrorSpec))
	name := n.podName("static")
	isMirror := func(p *v1.Pod) bool { return p.Annotations[mirrorAnnotation] != "" && runningAndReady(p) }
	mirror := n.waitAPIPod(name, 60*time.Second, "a running mirror pod", isMirror)
	if p := n.waitPod("static", 5*time.Second, "running", runningAndReady); mirror.Annotations[mirrorAnnotation] != p.Annotations["kubernetes.io/config.hash"] {
		t.Errorf("mirror annotation %q, want the static pod's config hash %q", mirror.Annotations[mirrorAnnotation], p.Annotations["kubernetes.io/config.hash"])
	}
	if refs := mirror.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].Name != n.name || refs[0].UID != node.UID {
		t.Errorf("mirror ownerReferences %+v, want the Node", refs)
	}
	if mirror.Spec.NodeName != n.name {
		t.Errorf("mirror nodeName %q", mirror.Spec.NodeName)
	}
	before := n.containers(false)
	slices.Sort(before)
	if len(before) != 2 {
		t.Fatalf("running sandbox+container of the static pod: %v, want 2", before)
	}

	n.kubectl("", "-n", n.ns, "delete", "pod", name, "--wait=false")
	again := n.waitAPIPod(name, 60*time.Second, "a new mirror pod after the delete", func(p *v1.Pod) bool {
		return p.UID != mirror.UID && p.DeletionTimestamp == nil && isMirror(p)
	})
	t.Logf("mirror pod recreated: uid %s -> %s", mirror.UID, again.UID)
	after := n.containers(false)
	slices.Sort(after)
	if !slices.Equal(before, after) {
		t.Errorf("deleting the mirror pod touched the static pod's containers: %v -> %v", before, after)
	}

	n.removeManifest("static.yaml")
	n.waitAPIPodGone(name, "", 60*time.Second)
	n.waitContainers(60*time.Second, "static pod stopped", false, func(ids []string) bool { return len(ids) == 0 })
}

const outageYAML = `apiVersion: v1
kind: Pod
metadata: {name: steady, namespace: @NS@}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sleep", "3600"]
---
apiVersion: v1
kind: Pod
metadata: {name: exiter, namespace: @NS@}
spec:
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c", "while [ ! -f /trigger/go ]; do sleep 1; done; exit 3"]
    volumeMounts:
    - {name: trigger, mountPath: /trigger}
  volumes:
  - name: trigger
    hostPath: {path: @TRIGGER@, type: Directory}
`

// testAPIServerOutage: with the API server down for a minute the pods keep
// running (same containers); a container that exits during the outage
// (triggered through a hostPath file) shows up in the API once it is back, and
// the node is Ready again.
func testAPIServerOutage(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.createNamespace()
	n.start()
	n.waitNodeReady(60 * time.Second)
	trigger := filepath.Join(n.dir, "trigger")
	if err := os.MkdirAll(trigger, 0o755); err != nil {
		t.Fatal(err)
	}
	n.applyYAML(strings.ReplaceAll(outageYAML, "@TRIGGER@", trigger))
	steady := n.waitAPIPod("steady", podStartTimeout, "running", runningAndReady)
	exiter := n.waitAPIPod("exiter", podStartTimeout, "running", runningAndReady)
	steadyUID := "io.kubernetes.pod.uid=" + string(steady.UID)
	before := n.containers(false, steadyUID)
	slices.Sort(before)
	if len(before) != 2 {
		t.Fatalf("running sandbox+container of steady: %v, want 2", before)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stopped := time.Now()
	if err := c.StopAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() { // never leave the next subtests without an API server
		if !restarted {
			if err := c.StartAPIServer(ctx); err != nil {
				t.Errorf("restart the API server: %v", err)
			}
		}
	}()
	t.Logf("API server stopped in %s", time.Since(stopped).Round(time.Millisecond))
	if err := os.WriteFile(filepath.Join(trigger, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	exiterUID := "io.kubernetes.pod.uid=" + string(exiter.UID)
	n.waitContainers(30*time.Second, "exiter's container exited during the outage", false,
		func(ids []string) bool { return len(ids) == 0 }, exiterUID, "io.kubernetes.container.name=app")
	time.Sleep(time.Until(stopped.Add(60 * time.Second)))
	if n.kubelet.exited() {
		t.Fatalf("kubelet exited during the outage: %v", n.kubelet.err)
	}
	during := n.containers(false, steadyUID)
	slices.Sort(during)
	if !slices.Equal(before, during) {
		t.Errorf("steady's containers changed during the outage: %v -> %v", before, during)
	}

	back := time.Now()
	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatalf("restart the API server: %v", err)
	}
	restarted = true
	t.Logf("API server back after %s (restart took %s)", time.Since(stopped).Round(time.Second), time.Since(back).Round(time.Millisecond))
	back = time.Now()
	// With a Lease the node status is only patched on change (or every 5 min):
	// liveness after the outage is the renewed Lease, then Ready stays or turns True.
	n.waitLease(60*time.Second, func(l *coordinationv1.Lease) bool { return l.Spec.RenewTime.Time.After(back) })
	t.Logf("lease renewed %s after the API server returned", time.Since(back).Round(time.Millisecond))
	n.waitNodeReady(60 * time.Second)
	p := n.waitAPIPod("exiter", 60*time.Second, "Failed with exit code 3", func(p *v1.Pod) bool {
		cs := containerStatus(p, "app")
		return p.Status.Phase == v1.PodFailed && cs != nil && cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 3
	})
	t.Logf("exiter's status caught up %s after the API server returned: %s", time.Since(back).Round(time.Millisecond), p.Status.Phase)
	if s := n.waitAPIPod("steady", 10*time.Second, "still running", runningAndReady); s.UID != steady.UID || restartCounts(s)["app"] != 0 {
		t.Errorf("steady after the outage: uid %s restarts %v", s.UID, restartCounts(s))
	}
	after := n.containers(false, steadyUID)
	slices.Sort(after)
	if !slices.Equal(before, after) {
		t.Errorf("steady's containers changed across the outage: %v -> %v", before, after)
	}
	if _, err := n.apiPod("steady"); apierrors.IsNotFound(err) {
		t.Error("steady vanished from the API")
	}
}
