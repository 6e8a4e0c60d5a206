//go:build linux

package e2e

import (
	"os"
	"strings"
	"testing"
)

// logging.vmodule through the real binary at -v=0: --vmodule=worker=4 writes
// the Debug lines of the pod workers' worker.go ("pod finished" when a static
// pod goes) and not those of the other files (podworkers.go's "pod
// termination requested", logged on the way).
func TestIntegrationVModule(t *testing.T) {
	n := newNode(t)
	n.extra = append(n.extra, "-v=0", "--logging-format=text", "--vmodule=worker=4") // over the nodes' -v=4 and JSON
	n.start()
	n.writeManifest("sleeper.yaml", cpuPodManifest("sleeper", ""))
	p := n.waitPod("sleeper", podStartTimeout, "running", runningAndReady)
	n.removeManifest("sleeper.yaml")
	n.waitGone(string(p.UID))
	n.waitLogLine("pod finished", podStartTimeout)
	b, err := os.ReadFile(n.kubelet.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "pod termination requested") {
		t.Error("a Debug line of podworkers.go was written with --vmodule=worker=4 at -v=0")
	}
}
