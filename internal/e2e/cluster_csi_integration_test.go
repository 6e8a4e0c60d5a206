//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// testNodeDriver is the node service of the test's CSI driver: it tells the
// kubelet its node ID, volume limit and topology.
type testNodeDriver struct {
	csipb.UnimplementedNodeServer
	nodeID string
}

func (d *testNodeDriver) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	return &csipb.NodeGetInfoResponse{NodeId: d.nodeID, MaxVolumesPerNode: 7,
		AccessibleTopology: &csipb.Topology{Segments: map[string]string{"topology.csi.e2e.example.com/node": d.nodeID}}}, nil
}

// testRegistrar plays node-driver-registrar: the registration service on a
// socket in plugins_registry, telling the kubelet where the driver is.
type testRegistrar struct {
	registerapi.UnimplementedRegistrationServer
	name, endpoint string
	versions       []string
	status         chan *registerapi.RegistrationStatus
}

func (r *testRegistrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: r.name, Endpoint: r.endpoint, SupportedVersions: r.versions}, nil
}

func (r *testRegistrar) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.status <- s
	return &registerapi.RegistrationStatusResponse{}, nil
}

// serveUnix serves srv on a new unix socket at path until the test ends.
func serveUnix(t *testing.T, path string, srv *grpc.Server) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("listen on %s: %v", path, err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
}

// testCSIRegistration (issue 16 item 2, its first part): CSI drivers
// register through plugins_registry as with upstream's kubelet. A CSI
// driver of the test and a registrar of the test stand in for a real
// driver and node-driver-registrar: the kubernetes-csi hostpath driver and
// registrar modules are not served by the Go module proxy this machine can
// reach, and a CSI node pod needs Bidirectional mount propagation, which
// this machine refuses; both speak the real CSI and pluginregistration APIs.
// Checked: the registrar is told it is registered; the node's CSINode
// (owned by the Node, with the migrated-plugins annotation) lists the driver
// with its node ID, topology key and volume limit; the Node carries the
// csi.volume.kubernetes.io/nodeid annotation and the topology label; a
// driver of an unsupported CSI version is refused with upstream's message;
// the driver's entries go when its registration socket does.
func testCSIRegistration(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.createNamespace()
	n.start()
	n.waitNodeReady(90 * time.Second)
	ctx := context.Background()
	const driver = "csi.e2e.example.com"
	nodeID := "e2e-" + n.name

	drvSock := filepath.Join(n.rootDir, "plugins", driver, "csi.sock")
	drv := grpc.NewServer()
	csipb.RegisterNodeServer(drv, &testNodeDriver{nodeID: nodeID})
	serveUnix(t, drvSock, drv)

	regSock := filepath.Join(n.rootDir, "plugins_registry", driver+"-reg.sock")
	reg := &testRegistrar{name: driver, endpoint: drvSock, versions: []string{"1.0.0"}, status: make(chan *registerapi.RegistrationStatus, 1)}
	regSrv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(regSrv, reg)
	serveUnix(t, regSock, regSrv)
	select {
	case s := <-reg.status:
		if !s.PluginRegistered || s.Error != "" {
			t.Fatalf("registration status %+v, want registered", s)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the kubelet did not register the CSI driver within 60s; its plugin log lines:\n%s", n.kubeletLogLines("lugin", "csi", "CSI"))
	}

	csiNodes := c.Client.StorageV1().CSINodes()
	n.poll(30*time.Second, "the CSINode lists the driver", func() (bool, string) {
		cn, err := csiNodes.Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, d := range cn.Spec.Drivers {
			if d.Name == driver {
				ok := d.NodeID == nodeID && slices.Equal(d.TopologyKeys, []string{"topology.csi.e2e.example.com/node"}) &&
					d.Allocatable != nil && d.Allocatable.Count != nil && *d.Allocatable.Count == 7
				return ok, fmt.Sprintf("%+v", d)
			}
		}
		return false, fmt.Sprintf("drivers %+v", cn.Spec.Drivers)
	})
	cn, err := csiNodes.Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node, err := n.apiNode()
	if err != nil {
		t.Fatal(err)
	}
	if len(cn.OwnerReferences) != 1 || cn.OwnerReferences[0].Kind != "Node" || cn.OwnerReferences[0].UID != node.UID {
		t.Errorf("CSINode owners %+v, want the Node %s", cn.OwnerReferences, node.UID)
	}
	if got := cn.Annotations[v1.MigratedPluginsAnnotationKey]; !strings.Contains(got, "kubernetes.io/gce-pd") || !strings.Contains(got, "kubernetes.io/aws-ebs") {
		t.Errorf("CSINode migrated plugins %q", got)
	}
	var ids map[string]string
	if err := json.Unmarshal([]byte(node.Annotations["csi.volume.kubernetes.io/nodeid"]), &ids); err != nil || ids[driver] != nodeID {
		t.Errorf("Node csi.volume.kubernetes.io/nodeid = %q (%v), want %s: %s", node.Annotations["csi.volume.kubernetes.io/nodeid"], err, driver, nodeID)
	}
	if got := node.Labels["topology.csi.e2e.example.com/node"]; got != nodeID {
		t.Errorf("Node topology label = %q, want %q", got, nodeID)
	}

	// A driver of CSI 2.x only is refused.
	badSock := filepath.Join(n.rootDir, "plugins_registry", "bad-reg.sock")
	bad := &testRegistrar{name: "bad.e2e.example.com", endpoint: drvSock, versions: []string{"2.0.0"}, status: make(chan *registerapi.RegistrationStatus, 1)}
	badSrv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(badSrv, bad)
	serveUnix(t, badSock, badSrv)
	select {
	case s := <-bad.status:
		want := `RegisterPlugin error -- plugin validation failed with err: kubernetes.io/csi: ValidatePlugin for CSI driver "bad.e2e.example.com" failed. None of the versions specified ["2.0.0"] are supported.`
		if s.PluginRegistered || !strings.HasPrefix(s.Error, want) {
			t.Errorf("registration status of a CSI 2.x driver: %+v, want refused with %q", s, want)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no registration status for the CSI 2.x driver within 60s")
	}

	// The registrar goes away: so does the driver.
	regSrv.Stop()
	if err := os.Remove(regSock); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n.poll(30*time.Second, "the driver gone from the CSINode and the Node", func() (bool, string) {
		cn, err := csiNodes.Get(ctx, n.name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err.Error()
		}
		node, nerr := n.apiNode()
		if nerr != nil {
			return false, nerr.Error()
		}
		has := cn != nil && slices.ContainsFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver })
		ann := node.Annotations["csi.volume.kubernetes.io/nodeid"]
		return !has && !strings.Contains(ann, driver), fmt.Sprintf("in CSINode %v, annotation %q", has, ann)
	})
}

// kubeletLogLines returns the kubelet log's lines holding any of words.
func (n *clusterNode) kubeletLogLines(words ...string) string {
	b, err := os.ReadFile(n.kubelet.logPath)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		for _, w := range words {
			if strings.Contains(line, w) {
				out = append(out, line)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
