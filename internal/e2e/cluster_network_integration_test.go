//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// testPodNetwork: on a host whose FORWARD policy is DROP, as Docker leaves it,
// a pod of the project's default network (bridge with ipMasq and hairpin,
// portmap, bandwidth) reaches another pod of its node by the pod's IP, and
// that pod's host port through its node's address on the pod bridge: both
// cross the FORWARD chain (br_netfilter), which only the shim's
// DOCKERSHIM-FORWARD rules open to the pod subnet. Upstream's e2e specs of
// HTTP hooks, Services and DNS need the same.
func testPodNetwork(t *testing.T, c *controlplane.Cluster) {
	requireForwardDrop(t)
	n := newClusterNode(t, c)
	n.useDefaultCNIConf()
	n.extra = append(n.extra, "--client-ca-file="+c.CAFile) // kubectl exec (newAPINode)
	n.start()
	n.createNamespace()
	n.waitNodeReady(60 * time.Second)

	hostPort := freePort(t)
	n.applyYAML(podYAML("server", 1,
		`["sh", "-c", "mkdir -p /www && echo pong > /www/index.html && exec httpd -f -p 8080 -h /www"]`,
		fmt.Sprintf("ports: [{containerPort: 8080, hostPort: %d}]", hostPort)))
	n.applyYAML(podYAML("client", 1, `["sleep", "3600"]`))
	server := n.waitAPIPod("server", 2*time.Minute, "running with an IP", podRunningWithIP)
	n.waitAPIPod("client", 2*time.Minute, "running with an IP", podRunningWithIP)

	gateway := n.subnet + ".1" // the bridge's address: the node, as its pods see it
	for _, tc := range []struct{ what, addr string }{
		{"the other pod's IP", server.Status.PodIP + " 8080"},
		{"the node's host port", fmt.Sprintf("%s %d", gateway, hostPort)},
	} {
		// busybox-static's wget crashes (static glibc); its nc does not.
		out, err := n.execIn("client", "sh", "-c", `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 `+tc.addr)
		if err != nil || !strings.HasSuffix(out, "\npong\n") {
			t.Errorf("pod client to %s (%s): %q, %v\n%s", tc.what, tc.addr, out, err, forwardRules(t))
		}
	}
	if rules := forwardRules(t); !strings.Contains(rules, "-s "+n.subnet+".0/24") || !strings.Contains(rules, "-d "+n.subnet+".0/24") {
		t.Errorf("DOCKERSHIM-FORWARD has no accept rules of the node's subnet %s.0/24:\n%s", n.subnet, rules)
	}
}

// podRunningWithIP reports whether p runs and has its IP.
func podRunningWithIP(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodRunning && p.Status.PodIP != ""
}

// execIn runs a command in the main container of pod name with kubectl exec
// (through the API server and the kubelet's streaming) and returns its output.
func (n *clusterNode) execIn(name string, cmd ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return n.c.KubectlRun(ctx, "", append([]string{"-n", n.ns, "exec", name, "-c", "main", "--"}, cmd...)...)
}

// requireForwardDrop fails the test unless the filter table's FORWARD policy
// is DROP, which Docker's daemon (the host's, started by prepare-host.sh) sets
// when it turns IP forwarding on: the tests that need it prove pod traffic
// crosses that policy.
func requireForwardDrop(t *testing.T) {
	t.Helper()
	out, err := exec.Command("iptables", "-w", "5", "-S", "FORWARD").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables -S FORWARD: %v: %s", err, out)
	}
	if !strings.HasPrefix(string(out), "-P FORWARD DROP\n") {
		t.Fatalf("the FORWARD policy of this host is not DROP, as the host's Docker daemon sets it on a stock host "+
			"(it does when it enables IP forwarding itself): the test would prove nothing\n%s", out)
	}
}

// forwardRules is the FORWARD chain and the shim's chain, for messages.
func forwardRules(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, chain := range []string{"FORWARD", "DOCKERSHIM-FORWARD"} {
		out, _ := exec.Command("iptables", "-w", "5", "-S", chain).CombinedOutput()
		b.Write(out)
	}
	return b.String()
}
