package dockershim

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

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
