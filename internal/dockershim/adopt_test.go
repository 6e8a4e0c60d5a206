package dockershim

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap/zaptest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/checkpoint"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// Sandboxes other runtimes created carry no label of this shim's: their
// namespace modes and host network come from Docker's modes, as cri-dockerd
// reports them; this shim's own keep their labels.
func TestForeignSandboxModes(t *testing.T) {
	t.Parallel()
	foreignJSON := func(network, pid, ipc string) libdocker.ContainerJSON {
		j := libdocker.ContainerJSON{Config: &libdocker.ContainerConfig{Labels: map[string]string{labelType: typeSandbox}}}
		j.ContainerJSONBase = &libdocker.ContainerJSONBase{HostConfig: &libdocker.HostConfig{
			NetworkMode: libdocker.NetworkMode(network), PidMode: libdocker.PidMode(pid), IpcMode: libdocker.IpcMode(ipc)}}
		return j
	}
	node, pod, ctr := runtimeapi.NamespaceMode_NODE, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_CONTAINER
	for _, tc := range []struct {
		desc          string
		j             libdocker.ContainerJSON
		hostNet       bool
		net, pid, ipc runtimeapi.NamespaceMode
	}{
		{"cri-dockerd pod network", foreignJSON("none", "", "shareable"), false, pod, ctr, pod},
		{"cri-dockerd host namespaces", foreignJSON("host", "host", "host"), true, node, node, node},
		{"this shim's (labels win)", func() libdocker.ContainerJSON {
			j := foreignJSON("host", "host", "host")
			j.Config.Labels[labelManaged] = "true"
			j.Config.Labels[labelHostNetwork] = "false"
			j.Config.Labels[labelNamespaceOpts] = `{"pid":1}`
			return j
		}(), false, pod, ctr, pod},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := sandboxUsesHostNetwork(tc.j); got != tc.hostNet {
				t.Errorf("host network = %v, want %v", got, tc.hostNet)
			}
			o := sandboxNamespaceOptions(tc.j)
			if o.Network != tc.net || o.Pid != tc.pid || o.Ipc != tc.ipc {
				t.Errorf("namespace options = %v, want network %v pid %v ipc %v", o, tc.net, tc.pid, tc.ipc)
			}
		})
	}
}

// adoptNet is the network part adoption uses: libcni's cached IPs by ID.
type adoptNet struct {
	networkPlugin
	ips map[string][]string
}

func (n adoptNet) CachedIPs(_ context.Context, id string) ([]string, error) {
	if ips, ok := n.ips[id]; ok {
		return ips, nil
	}
	return nil, errors.New("fake: no cache entry")
}

// adoptJSON is a sandbox as Docker inspects it: managed (this shim's) or
// not, with its network mode, running with pid or stopped.
func adoptJSON(t *testing.T, id string, managed bool, networkMode string, pid int) libdocker.ContainerJSON {
	t.Helper()
	l := map[string]string{labelType: typeSandbox}
	if managed {
		l[labelManaged] = "true"
	}
	raw, err := json.Marshal(map[string]any{
		"Id": id, "Name": "/k8s_POD_web_ns_uid-" + id[:4] + "_0_1a2b3c4d", "Created": "2026-01-02T03:04:05Z",
		"State":      map[string]any{"Running": pid > 0, "Pid": pid},
		"HostConfig": map[string]any{"NetworkMode": networkMode},
		"Config":     map[string]any{"Labels": l},
	})
	if err != nil {
		t.Fatal(err)
	}
	var j libdocker.ContainerJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		t.Fatal(err)
	}
	return j
}

func TestSandboxCheckpointAdoption(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cps, err := checkpoint.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	id := func(c byte) string { return strings.Repeat(string(c), 64) }
	net := adoptNet{ips: map[string][]string{id('a'): {"10.1.0.5"}, id('e'): {"10.1.0.6"}}}
	s := newService(serviceParts{checkpoints: cps, network: net}, Options{RootDirectory: filepath.Dir(dir)}, zaptest.NewLogger(t))
	s.legacyDirs = []string{dir}
	ctx := context.Background()

	// This shim's own sandbox without a checkpoint is not adopted.
	if _, err := s.sandboxCheckpoint(ctx, adoptJSON(t, id('b'), true, "none", 0)); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("own sandbox: %v, want ErrNotFound", err)
	}
	// A foreign one gets its IP from libcni's cache, and a checkpoint.
	cp, err := s.sandboxCheckpoint(ctx, adoptJSON(t, id('a'), false, "none", 0))
	if err != nil || len(cp.IPs) != 1 || cp.IPs[0] != "10.1.0.5" || !cp.NetworkSetUp || cp.UID != "uid-aaaa" || cp.Name != "web" {
		t.Fatalf("foreign sandbox: %+v, %v", cp, err)
	}
	if _, err := cps.Read(id('a')); err != nil {
		t.Errorf("no checkpoint written: %v", err)
	}
	// Host network: no IP, nothing to tear down.
	cp, err = s.sandboxCheckpoint(ctx, adoptJSON(t, id('c'), false, "host", 0))
	if err != nil || !cp.HostNetwork || cp.NetworkSetUp || len(cp.IPs) != 0 {
		t.Errorf("host network sandbox: %+v, %v", cp, err)
	}
	// Running, but its IP is found nowhere: returned for a teardown's DEL,
	// not written, so that the next question tries again.
	cp, err = s.sandboxCheckpoint(ctx, adoptJSON(t, id('d'), false, "none", 1<<30))
	if err != nil || !cp.NetworkSetUp || len(cp.IPs) != 0 {
		t.Errorf("no IP: %+v, %v", cp, err)
	}
	if _, err := cps.Read(id('d')); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("an adoption without IP was written: %v", err)
	}
	// A 1.23 checkpoint in the shim's own directory, asked for at once by
	// many: every answer keeps its port mapping.
	legacy := `{"version":"v1","name":"web","namespace":"ns","data":{"port_mappings":[{"protocol":"tcp","container_port":80,"host_port":8080}]},"checksum":928727533}`
	if err := os.WriteFile(filepath.Join(dir, id('e')), []byte(legacy), 0o600); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			cp, err := s.sandboxCheckpoint(ctx, adoptJSON(t, id('e'), false, "none", 0))
			if err != nil || len(cp.PortMappings) != 1 || cp.PortMappings[0].HostPort != 8080 || cp.IPs[0] != "10.1.0.6" {
				t.Errorf("concurrent adoption: %+v, %v", cp, err)
			}
		})
	}
	wg.Wait()
}
