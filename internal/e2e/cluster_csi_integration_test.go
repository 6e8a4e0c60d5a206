//go:build linux

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// testNodeDriver is the node service of the test's CSI driver: it tells the
// kubelet its node ID, volume limit and topology, stages a volume by
// bind-mounting its directory under dataDir on the staging path and
// publishes it by bind-mounting that on the target path (inline volumes:
// their directory straight on the target), and records the calls.
type testNodeDriver struct {
	csipb.UnimplementedNodeServer
	nodeID  string
	dataDir string

	mu    sync.Mutex
	calls []string
	ctxs  map[string]map[string]string // volume ID -> publish volume context
}

func (d *testNodeDriver) record(call string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, call)
}

func (d *testNodeDriver) called() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.calls...)
}

func (d *testNodeDriver) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	rpc := func(t csipb.NodeServiceCapability_RPC_Type) *csipb.NodeServiceCapability {
		return &csipb.NodeServiceCapability{Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: t}}}
	}
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: []*csipb.NodeServiceCapability{
		rpc(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME), rpc(csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS)}}, nil
}

// NodeGetVolumeStats answers fixed figures, so that the test can tell them
// from a statfs.
func (d *testNodeDriver) NodeGetVolumeStats(_ context.Context, req *csipb.NodeGetVolumeStatsRequest) (*csipb.NodeGetVolumeStatsResponse, error) {
	d.record("stats " + req.VolumeId)
	return &csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{
		{Unit: csipb.VolumeUsage_BYTES, Total: 1000000, Available: 600000, Used: 400000},
		{Unit: csipb.VolumeUsage_INODES, Total: 100, Available: 60, Used: 40},
	}}, nil
}

func (d *testNodeDriver) volumeDir(id string) (string, error) {
	dir := filepath.Join(d.dataDir, id)
	return dir, os.MkdirAll(dir, 0o755)
}

func (d *testNodeDriver) NodeStageVolume(_ context.Context, req *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	d.record("stage " + req.VolumeId + " " + req.StagingTargetPath)
	src, err := d.volumeDir(req.VolumeId)
	if err == nil {
		err = unix.Mount(src, req.StagingTargetPath, "", unix.MS_BIND, "")
	}
	return &csipb.NodeStageVolumeResponse{}, err
}

func (d *testNodeDriver) NodeUnstageVolume(_ context.Context, req *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	d.record("unstage " + req.VolumeId)
	return &csipb.NodeUnstageVolumeResponse{}, unix.Unmount(req.StagingTargetPath, 0)
}

func (d *testNodeDriver) NodePublishVolume(_ context.Context, req *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	d.record("publish " + req.VolumeId + " " + req.TargetPath)
	d.mu.Lock()
	d.ctxs[req.VolumeId] = req.VolumeContext
	d.mu.Unlock()
	src := req.StagingTargetPath
	var err error
	if src == "" {
		src, err = d.volumeDir(req.VolumeId)
	}
	if err == nil {
		err = os.MkdirAll(req.TargetPath, 0o750)
	}
	if err == nil {
		err = unix.Mount(src, req.TargetPath, "", unix.MS_BIND, "")
	}
	return &csipb.NodePublishVolumeResponse{}, err
}

func (d *testNodeDriver) NodeUnpublishVolume(_ context.Context, req *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	d.record("unpublish " + req.VolumeId)
	if err := unix.Unmount(req.TargetPath, 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return nil, err
	}
	return &csipb.NodeUnpublishVolumeResponse{}, os.RemoveAll(req.TargetPath)
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

// registerCSIDriver plays node-driver-registrar for the CSI driver at
// endpoint (a registration socket in plugins_registry) and waits until the
// kubelet says it registered it; the registrar gets later statuses.
func registerCSIDriver(t testing.TB, n *clusterNode, driver, endpoint string) *testRegistrar {
	t.Helper()
	reg := &testRegistrar{name: driver, endpoint: endpoint, versions: []string{"1.0.0"}, status: make(chan *registerapi.RegistrationStatus, 1)}
	regSrv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(regSrv, reg)
	serveUnix(t, filepath.Join(n.rootDir, "plugins_registry", driver+"-reg.sock"), regSrv)
	select {
	case s := <-reg.status:
		if !s.PluginRegistered {
			t.Fatalf("registration of %s: %+v", driver, s)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the CSI driver %s was not registered within 60s", driver)
	}
	return reg
}

// serveUnix serves srv on a new unix socket at path until the test ends.
func serveUnix(t testing.TB, path string, srv *grpc.Server) {
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

// testCSI (issue 16 item 2): CSI drivers
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
func testCSI(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.createNamespace()
	n.start()
	n.waitNodeReady(90 * time.Second)
	ctx := context.Background()
	const driver = "csi.e2e.example.com"
	nodeID := "e2e-" + n.name

	drvSock := filepath.Join(n.rootDir, "plugins", driver, "csi.sock")
	drv := grpc.NewServer()
	nodeDrv := &testNodeDriver{nodeID: nodeID, dataDir: filepath.Join(n.dir, "csi-data"), ctxs: map[string]map[string]string{}}
	csipb.RegisterNodeServer(drv, nodeDrv)
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

	checkCSIVolumes(n, driver, nodeDrv)
	checkMockCSIDriver(n)

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

// checkCSIVolumes: a pod with a CSI PV (attachRequired false, its claim
// bound to it) and an inline CSI volume runs; the PV is staged on upstream's
// global mount path and published on the pod's, with vol_data.json, pod info
// in its context (podInfoOnMount) and the fsGroup (fsGroupPolicy File), its
// claim's kubelet_volume_stats_* from the driver's NodeGetVolumeStats; the
// inline volume is published with the ephemeral context; the pod's deletion
// unpublishes both and unstages the PV.
func checkCSIVolumes(n *clusterNode, driver string, d *testNodeDriver) {
	t := n.t
	n.deleteAtEnd("csidriver/"+driver, "pv/csi-"+n.ns)
	handle := "vol-" + n.ns
	n.applyYAML(fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: %[1]s}
spec:
  attachRequired: false
  podInfoOnMount: true
  fsGroupPolicy: File
  volumeLifecycleModes: [Persistent, Ephemeral]
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: csi-@NS@}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  claimRef: {namespace: @NS@, name: csi-claim}
  csi: {driver: %[1]s, volumeHandle: %[2]s, volumeAttributes: {kind: persistent}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: csi-claim, namespace: @NS@}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: csi-user, namespace: @NS@}
spec:
  nodeName: %[3]s
  terminationGracePeriodSeconds: 1
  securityContext: {fsGroup: 3000}
  containers:
  - name: main
    image: @IMAGE@
    imagePullPolicy: Never
    command: [sh, -c, "echo pv > /data/hello && echo inline > /inline/hi && sleep 3600"]
    volumeMounts:
    - {name: data, mountPath: /data}
    - {name: inline, mountPath: /inline}
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: csi-claim}
  - name: inline
    csi: {driver: %[1]s, volumeAttributes: {kind: inline}}
`, driver, handle, n.name))
	pod := n.waitAPIPod("csi-user", 120*time.Second, "running on its CSI volumes", runningAndReady)
	inlineHandle := fmt.Sprintf("csi-%x", sha256.Sum256([]byte(string(pod.UID)+"inline")))
	n.poll(30*time.Second, "the pod wrote through both CSI volumes", func() (bool, string) {
		a, err1 := os.ReadFile(filepath.Join(d.dataDir, handle, "hello"))
		b, err2 := os.ReadFile(filepath.Join(d.dataDir, inlineHandle, "hi"))
		return string(a) == "pv\n" && string(b) == "inline\n", fmt.Sprintf("%q %v %q %v", a, err1, b, err2)
	})
	staging := filepath.Join(n.rootDir, "plugins", "kubernetes.io/csi", driver, fmt.Sprintf("%x", sha256.Sum256([]byte(handle))), "globalmount")
	target := filepath.Join(n.rootDir, "pods", string(pod.UID), "volumes", "kubernetes.io~csi", "csi-"+n.ns, "mount")
	calls := d.called()
	for _, want := range []string{"stage " + handle + " " + staging, "publish " + handle + " " + target,
		"publish " + inlineHandle + " " + filepath.Join(n.rootDir, "pods", string(pod.UID), "volumes", "kubernetes.io~csi", "inline", "mount")} {
		if !slices.Contains(calls, want) {
			t.Errorf("driver calls %v lack %q", calls, want)
		}
	}
	var vd map[string]string
	b, err := os.ReadFile(filepath.Join(filepath.Dir(target), "vol_data.json"))
	if err == nil {
		err = json.Unmarshal(b, &vd)
	}
	if err != nil || vd["driverName"] != driver || vd["volumeHandle"] != handle ||
		vd["specVolID"] != "csi-"+n.ns || vd["volumeLifecycleMode"] != "Persistent" || vd["nodeName"] != n.name {
		t.Errorf("vol_data.json = %s (%v)", b, err)
	}
	d.mu.Lock()
	pctx, ictx := d.ctxs[handle], d.ctxs[inlineHandle]
	d.mu.Unlock()
	if pctx["csi.storage.k8s.io/pod.name"] != "csi-user" || pctx["csi.storage.k8s.io/pod.uid"] != string(pod.UID) ||
		pctx["csi.storage.k8s.io/ephemeral"] != "false" || pctx["kind"] != "persistent" {
		t.Errorf("persistent publish context %v", pctx)
	}
	if ictx["csi.storage.k8s.io/ephemeral"] != "true" || ictx["kind"] != "inline" {
		t.Errorf("inline publish context %v", ictx)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(d.dataDir, handle), &st); err != nil || st.Gid != 3000 {
		t.Errorf("the CSI volume's group after fsGroup 3000 (policy File): %d %v", st.Gid, err)
	}

	// The claim's stats come from the driver's NodeGetVolumeStats.
	body, code, err := n.get("/metrics")
	if err != nil || code != 200 {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	for _, want := range []string{
		fmt.Sprintf(`kubelet_volume_stats_capacity_bytes{namespace=%q,persistentvolumeclaim="csi-claim"} 1e+06`, n.ns),
		fmt.Sprintf(`kubelet_volume_stats_used_bytes{namespace=%q,persistentvolumeclaim="csi-claim"} 400000`, n.ns),
		fmt.Sprintf(`kubelet_volume_stats_inodes_free{namespace=%q,persistentvolumeclaim="csi-claim"} 60`, n.ns),
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	n.kubectl("", "-n", n.ns, "delete", "pod", "csi-user", "--wait=false")
	n.waitAPIPodGone("csi-user", string(pod.UID), 60*time.Second)
	n.poll(30*time.Second, "both volumes unpublished and the PV unstaged", func() (bool, string) {
		calls := d.called()
		ok := slices.Contains(calls, "unpublish "+handle) && slices.Contains(calls, "unpublish "+inlineHandle) && slices.Contains(calls, "unstage "+handle)
		return ok, fmt.Sprint(calls)
	})
	if fs := mountsAt(t, staging); len(fs) != 0 {
		t.Errorf("still mounted at the staging path: %v", fs)
	}
	if _, err := os.Stat(filepath.Dir(staging)); !os.IsNotExist(err) {
		t.Errorf("the staging directory is left: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(d.dataDir, handle, "hello")); err != nil || string(b) != "pv\n" {
		t.Errorf("the CSI volume's data after the pod: %q %v", b, err)
	}
}

// checkMockCSIDriver runs a pod on a PV of upstream's mock CSI driver (the
// driver of Kubernetes' own csi-mock storage tests, built by
// scripts/build-controlplane.sh as csimockdriver and run as a host process;
// a registrar of the test registers it): the driver is registered (its
// CSINode entry), staged, published, the pod writes into the volume; a
// kubelet restart registers the driver again and keeps the pod; the pod's
// deletion unpublishes and unstages the volume, each call answered without
// error by the driver.
func checkMockCSIDriver(n *clusterNode) {
	t := n.t
	ctx := context.Background()
	const driver = "csi-mock.e2e.example.com"
	bin, err := controlplane.UpstreamBinary(ctx, "csimockdriver")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(n.rootDir, "plugins", driver, "csi.sock")
	if err := os.MkdirAll(filepath.Dir(sock), 0o750); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(n.dir, "csimockdriver.log")
	p, err := startProc("csimockdriver", logPath, bin, "--endpoint="+sock, "--name="+driver)
	if err != nil {
		t.Fatal(err)
	}
	n.procs = append(n.procs, p)
	t.Cleanup(func() { _ = p.stop(10 * time.Second) })
	n.poll(30*time.Second, "the mock CSI driver's socket", func() (bool, string) {
		_, err := os.Stat(sock)
		return err == nil, fmt.Sprint(err)
	})
	reg := registerCSIDriver(t, n, driver, sock)
	n.deleteAtEnd("csidriver/"+driver, "pv/mock-"+n.ns)
	// Volume "1" is the mock driver's first pre-provisioned volume.
	n.applyYAML(fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: %[1]s}
spec:
  attachRequired: false
  volumeLifecycleModes: [Persistent]
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: mock-@NS@}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  claimRef: {namespace: @NS@, name: mock-claim}
  csi: {driver: %[1]s, volumeHandle: "1"}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: mock-claim, namespace: @NS@}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: mock-user, namespace: @NS@}
spec:
  nodeName: %[2]s
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: @IMAGE@
    imagePullPolicy: Never
    command: [sh, -c, "echo mock > /data/hello && sleep 3600"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: mock-claim}
`, driver, n.name))
	pod := n.waitAPIPod("mock-user", 120*time.Second, "running on the mock driver's volume", runningAndReady)
	target := filepath.Join(n.rootDir, "pods", string(pod.UID), "volumes", "kubernetes.io~csi", "mock-"+n.ns, "mount")
	n.poll(30*time.Second, "the pod's file in the published volume", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(target, "hello"))
		return string(b) == "mock\n", fmt.Sprintf("%q %v", b, err)
	})
	cn, err := n.c.Client.StorageV1().CSINodes().Get(ctx, n.name, metav1.GetOptions{})
	if err != nil || !slices.ContainsFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver && d.NodeID == driver }) {
		t.Errorf("CSINode lacks the mock driver: %v %v", cn, err)
	}

	// A kubelet restart registers the driver again from its socket and
	// keeps the pod and its volume.
	if err := n.kubelet.stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	n.start()
	n.waitNodeReady(60 * time.Second)
	select {
	case s := <-reg.status:
		if !s.PluginRegistered {
			t.Errorf("mock driver registration after the restart: %+v", s)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the restarted kubelet did not register the mock CSI driver again within 60s")
	}
	time.Sleep(3 * time.Second) // a few syncs of the pod
	after := n.waitAPIPod("mock-user", 30*time.Second, "still running after the restart", runningAndReady)
	if cs := after.Status.ContainerStatuses; len(cs) != 1 || cs[0].RestartCount != 0 {
		t.Errorf("after a kubelet restart the pod's container restarted: %+v", cs)
	}
	if b, err := os.ReadFile(filepath.Join(target, "hello")); err != nil || string(b) != "mock\n" {
		t.Errorf("the published volume after the restart: %q %v", b, err)
	}
	n.kubectl("", "-n", n.ns, "delete", "pod", "mock-user", "--wait=false")
	n.waitAPIPodGone("mock-user", string(pod.UID), 60*time.Second)
	n.poll(30*time.Second, "the mock driver unpublished and unstaged the volume", func() (bool, string) {
		b, _ := os.ReadFile(logPath)
		log := string(b)
		for _, m := range []string{"NodeStageVolume", "NodePublishVolume", "NodeUnpublishVolume", "NodeUnstageVolume"} {
			if !strings.Contains(log, "call /csi.v1.Node/"+m+" err=<nil>") {
				return false, log
			}
		}
		return true, ""
	})
}
