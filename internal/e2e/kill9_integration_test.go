//go:build linux

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kubelet-dockershim/kubelet/internal/faultinject"
)

// The kubelet (with its built-in shim) SIGKILLed at the injected points of a
// pod's start, the worst moments for its state (issue 11 item 5): a restart
// converges to exactly one running sandbox and container, one IP, no orphan
// checkpoint (nor temp file), and iptables rules for the live pod IP only.
func TestIntegrationDockerModeKill9AtInjectedPoints(t *testing.T) {
	s := requireSuite(t)
	bin := faultInjectBinary(t, s)
	for _, point := range []string{
		"dockershim.sandbox.before-cni-add", // sandbox created and checkpointed, no network yet
		"dockershim.sandbox.after-cni-add",  // IP allocated, not yet in the checkpoint
		"kuberuntime.container.before-start",
		"checkpoint.before-rename", // in the middle of a checkpoint write
	} {
		t.Run(point, func(t *testing.T) {
			n := newNode(t)
			n.writeChurnCNIConf() // bridge with ipMasq + portmap: per-pod iptables rules
			linked, killFile := linkFaultBinary(t, n, bin, faultinject.KillFile, point)
			n.startBinary(linked)
			hostPort := freePort(t)
			n.writeManifest("k9.yaml", churnManifest("k9", hostPort))

			if !n.kubelet.wait(90 * time.Second) {
				t.Fatalf("the kubelet did not reach %s within 90s", point)
			}
			if ws, ok := n.kubelet.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("the kubelet ended otherwise than by SIGKILL at %s: %v", point, n.kubelet.err)
			}
			if err := os.Remove(killFile); err != nil {
				t.Fatal(err)
			}
			n.startBinary(linked)
			restarted := time.Now()
			p := n.waitPod("k9", 2*time.Minute, "running after the restart", runningAndReady)
			t.Logf("pod running %s after the restart", time.Since(restarted).Round(100*time.Millisecond))
			n.checkConverged(p)
		})
	}
}

// startBinary starts the kubelet from bin (instead of the suite's build) and
// waits until it is healthy.
func (n *node) startBinary(bin string) {
	n.t.Helper()
	p, err := startProc("kubelet", filepath.Join(n.dir, "kubelet.log"), bin, n.args()...)
	if err != nil {
		n.t.Fatal(err)
	}
	n.kubelet = p
	n.procs = append(n.procs, p)
	n.waitHealthy(60 * time.Second)
}

// ipv4 matches the addresses of iptables rules.
var ipv4 = regexp.MustCompile(`\b(\d+\.\d+\.\d+\.\d+)\b`)

// checkConverged waits (bounded) until the node holds exactly the running pod
// p: one running sandbox and one running container of it, one host-local IP
// (its own), no checkpoint file but those of the pod's sandboxes (no orphan,
// no temp file), and no iptables rule naming another address of the node's
// subnet.
func (n *node) checkConverged(p *v1.Pod) {
	n.t.Helper()
	uid := "io.kubernetes.pod.uid=" + string(p.UID)
	deadline := time.Now().Add(90 * time.Second)
	for {
		sandboxes := n.containers(false, uid, "io.kubernetes.docker.type=podsandbox")
		ctrs := n.containers(false, uid, "io.kubernetes.docker.type=container")
		all := n.containers(true, uid)
		allSandboxes := n.containers(true, uid, "io.kubernetes.docker.type=podsandbox")
		ips := n.reservedIPs()
		cps := n.checkpoints()
		leaked := n.foreignRuleIPs(p.Status.PodIP)
		var problems []string
		if len(sandboxes) != 1 || len(ctrs) != 1 {
			problems = append(problems, "running sandboxes "+strings.Join(sandboxes, ",")+" containers "+strings.Join(ctrs, ","))
		}
		if len(ips) != 1 || ips[0] != p.Status.PodIP {
			problems = append(problems, "IPs "+strings.Join(ips, ",")+", pod IP "+p.Status.PodIP)
		}
		// Exited sandboxes are the GC's (and keep their checkpoint until
		// removed); a checkpoint of no sandbox, or a temp file, is an orphan.
		for _, cp := range cps {
			if !slices.Contains(allSandboxes, cp) {
				problems = append(problems, "orphan checkpoint file "+cp)
			}
		}
		if len(leaked) > 0 {
			problems = append(problems, "iptables rules of other addresses "+strings.Join(leaked, ","))
		}
		if len(problems) == 0 {
			n.t.Logf("converged: sandbox %.12s, IP %s; %d containers of the pod in Docker, exited ones included", sandboxes[0], ips[0], len(all))
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("not converged within 90s: %s", strings.Join(problems, "; "))
		}
		time.Sleep(time.Second)
	}
}

// foreignRuleIPs returns the addresses of the node's subnet that iptables
// rules name, other than the pods' IPs and the subnet's network and gateway.
func (n *node) foreignRuleIPs(podIPs ...string) []string {
	n.t.Helper()
	var out []string
	for _, table := range []string{"nat", "filter"} {
		save, err := exec.Command("iptables-save", "-t", table).Output()
		if err != nil {
			n.t.Fatalf("iptables-save -t %s: %v", table, err)
		}
		for _, ip := range ipv4.FindAllString(string(save), -1) {
			if strings.HasPrefix(ip, n.subnet+".") && !slices.Contains(podIPs, ip) && ip != n.subnet+".0" && ip != n.subnet+".1" && !slices.Contains(out, ip) {
				out = append(out, ip)
			}
		}
	}
	return out
}
