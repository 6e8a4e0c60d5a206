//go:build linux

package dockershim_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/checkpoint"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/network"
)

// legacy123Checkpoint is the checkpoint kubelet 1.23's dockershim writes
// for a pod forwarding host port 40123 to 8080/tcp: its checksum is FNV-1a
// over go-spew's dump of dockershim.CheckpointData (computed with go-spew
// v1.1.1 over structs of that package's shape).
const legacy123Checkpoint = `{"version":"v1","name":"web","namespace":"%NS%","data":{"port_mappings":[{"protocol":"tcp","container_port":8080,"host_port":40123}]},"checksum":3659462431}`

// TestIntegrationAdopt123Sandbox: a sandbox as kubelet 1.23's dockershim
// left it (its Docker name with the random 7th field, its labels, its
// checkpoint in the same directory as this shim's, a CNI ADD cached by
// libcni, no IP recorded anywhere else) is reported with its IP and
// metadata, its checkpoint becomes this shim's with the port mapping kept,
// and StopPodSandbox's CNI DEL releases the IP, the host port's rules and
// the cache entry.
func TestIntegrationAdopt123Sandbox(t *testing.T) {
	e := newEnv(t, true)
	s := startShim(t, e)
	ctx := ctxT(t)
	ns := "it-" + e.runID
	uid := "uid-" + e.runID
	name := "k8s_POD_web_" + ns + "_" + uid + "_0_1a2b3c4d"
	out, err := exec.Command("docker", "run", "-d", "--name", name, "--network", "none",
		"--label", "io.kubernetes.docker.type=podsandbox", "--label", "io.kubernetes.container.name=POD",
		"--label", "io.kubernetes.pod.name=web", "--label", "io.kubernetes.pod.namespace="+ns,
		"--label", "io.kubernetes.pod.uid="+uid, "--label", "annotation.kubernetes.io/config.source=file",
		"--label", testLabel+"="+e.runID, pauseImage).CombinedOutput()
	if err != nil {
		t.Fatalf("docker run: %v: %s", err, out)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() { removeSandboxDirect(id) })
	pid, err := exec.Command("docker", "inspect", "--format", "{{.State.Pid}}", id).Output()
	if err != nil {
		t.Fatal(err)
	}

	// The 1.23 dockershim's CNI ADD (libcni caches its result) and checkpoint.
	netw, err := network.New(network.Options{ConfDir: e.cniConf, BinDirs: []string{cniBinDir()}, CacheDir: e.cniCache})
	if err != nil {
		t.Fatal(err)
	}
	res, err := netw.SetUpPod(ctx, network.Pod{ID: id, Name: "web", Namespace: ns,
		NetNS:        "/proc/" + strings.TrimSpace(string(pid)) + "/ns/net",
		PortMappings: []network.PortMapping{{HostPort: 40123, ContainerPort: 8080, Protocol: "tcp"}}})
	if err != nil {
		t.Fatalf("CNI ADD: %v", err)
	}
	cpPath := filepath.Join(e.root, "sandbox", id)
	if err := os.WriteFile(cpPath, []byte(strings.ReplaceAll(legacy123Checkpoint, "%NS%", ns)), 0o600); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(natRules(t), id) {
		t.Fatal("portmap made no rule naming the sandbox")
	}

	st, err := s.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		t.Fatal(err)
	}
	m := st.Status.Metadata
	if st.Status.Network.GetIp() != res.IPs[0] || st.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY ||
		m.Name != "web" || m.Namespace != ns || m.Uid != uid || m.Attempt != 0 ||
		st.Status.Linux.Namespaces.Options.Network != runtimeapi.NamespaceMode_POD ||
		st.Status.Linux.Namespaces.Options.Pid != runtimeapi.NamespaceMode_CONTAINER {
		t.Fatalf("adopted sandbox status = %v, want IP %s", st.Status, res.IPs[0])
	}
	store, err := checkpoint.New(filepath.Join(e.root, "sandbox"))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := store.Read(id)
	if err != nil {
		t.Fatalf("the adopted sandbox has no checkpoint of this shim's: %v", err)
	}
	if !cp.NetworkSetUp || len(cp.IPs) == 0 || cp.IPs[0] != res.IPs[0] || cp.UID != uid ||
		len(cp.PortMappings) != 1 || cp.PortMappings[0] != (checkpoint.PortMapping{Protocol: "tcp", ContainerPort: 8080, HostPort: 40123}) {
		t.Fatalf("adopted checkpoint = %+v", cp)
	}

	if _, err := s.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
	if ips := e.reservedIPs(t); len(ips) != 0 {
		t.Errorf("IPs still reserved after the adopted sandbox stopped: %v", ips)
	}
	if strings.Contains(natRules(t), id) {
		t.Error("portmap's rules of the adopted sandbox are still there")
	}
	if entries, _ := os.ReadDir(filepath.Join(e.cniCache, "results")); len(entries) != 0 {
		t.Errorf("libcni cache entries left: %v", entries)
	}
	if _, err := s.rt.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cpPath); !os.IsNotExist(err) {
		t.Errorf("checkpoint left after RemovePodSandbox: %v", err)
	}
}

// natRules is the host's nat table.
func natRules(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("iptables-save", "-t", "nat").Output()
	if err != nil {
		t.Fatalf("iptables-save: %v", err)
	}
	return string(out)
}
