//go:build linux

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// expandingNodeDriver is testNodeDriver with node expansion: it records
// each NodeExpandVolume as "expand <volume> <path> <bytes>".
type expandingNodeDriver struct {
	*testNodeDriver
}

func (d *expandingNodeDriver) NodeGetCapabilities(ctx context.Context, req *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	resp, err := d.testNodeDriver.NodeGetCapabilities(ctx, req)
	if err != nil {
		return nil, err
	}
	resp.Capabilities = append(resp.Capabilities, &csipb.NodeServiceCapability{Type: &csipb.NodeServiceCapability_Rpc{
		Rpc: &csipb.NodeServiceCapability_RPC{Type: csipb.NodeServiceCapability_RPC_EXPAND_VOLUME}}})
	return resp, nil
}

func (d *expandingNodeDriver) NodeExpandVolume(_ context.Context, req *csipb.NodeExpandVolumeRequest) (*csipb.NodeExpandVolumeResponse, error) {
	d.record(fmt.Sprintf("expand %s %s %d", req.VolumeId, req.VolumePath, req.CapacityRange.GetRequiredBytes()))
	return &csipb.NodeExpandVolumeResponse{CapacityBytes: req.CapacityRange.GetRequiredBytes()}, nil
}

// expansions are the driver's NodeExpandVolume calls.
func (d *expandingNodeDriver) expansions() []string {
	return slices.DeleteFunc(d.called(), func(c string) bool { return !strings.HasPrefix(c, "expand ") })
}

// testCSIReadWriteManyExpansion: a ReadWriteMany CSI volume mounted by a pod
// on each of two nodes (a shared directory, as NFS-like drivers do) is
// expanded on both, as upstream's kubelet does. The first node to sync its
// pod takes the claim's node resize (NodeResizePending: NodeExpandVolume,
// the claim's capacity updated, its resize status cleared); the other,
// whose volume was mounted at the old size, then expands it too, once,
// without writing the claim; FileSystemResizeSuccess events name each node.
// Node 2 syncs pods on changes only (--sync-frequency=10m), so the test
// decides when it reads the claim.
func testCSIReadWriteManyExpansion(t *testing.T, c *controlplane.Cluster) {
	const driver = "rwx.csi.e2e.example.com"
	n1, n2 := newClusterNode(t, c), newClusterNode(t, c)
	n2.extra = append(n2.extra, "--sync-frequency=10m")
	n1.createNamespace()
	n1.start()
	n2.start()
	n1.waitNodeReady(90 * time.Second)
	n2.waitNodeReady(90 * time.Second)
	ctx := context.Background()

	shared := filepath.Join(n1.dir, "rwx-data")
	var drivers []*expandingNodeDriver
	for _, n := range []*clusterNode{n1, n2} {
		d := &expandingNodeDriver{&testNodeDriver{nodeID: "e2e-" + n.name, dataDir: shared, ctxs: map[string]map[string]string{}}}
		sock := filepath.Join(n.rootDir, "plugins", driver, "csi.sock")
		srv := grpc.NewServer()
		csipb.RegisterNodeServer(srv, d)
		serveUnix(t, sock, srv)
		registerCSIDriver(t, n, driver, sock)
		drivers = append(drivers, d)
	}
	pvName := "rwx-" + n1.ns
	n1.deleteAtEnd("csidriver/"+driver, "pv/"+pvName)
	pod := func(name, node string) string {
		return fmt.Sprintf(`---
apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: @NS@}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 1
  containers:
  - {name: main, image: @IMAGE@, imagePullPolicy: Never, command: [sh, -c, "echo %[1]s > /data/%[1]s && sleep 3600"],
     volumeMounts: [{name: data, mountPath: /data}]}
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: shared}}
`, name, node)
	}
	n1.applyYAML(fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: %[1]s}
spec: {attachRequired: false}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: %[2]s}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteMany]
  storageClassName: ""
  claimRef: {namespace: @NS@, name: shared}
  csi: {driver: %[1]s, volumeHandle: %[2]s}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: shared, namespace: @NS@}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  volumeName: %[2]s
  resources: {requests: {storage: 1Gi}}
`, driver, pvName) + pod("a", n1.name) + pod("b", n2.name))
	podA := n1.waitAPIPod("a", 120*time.Second, "running on node 1", runningAndReady)
	podB := n1.waitAPIPod("b", 120*time.Second, "running on node 2", runningAndReady)
	for i, d := range drivers {
		if e := d.expansions(); len(e) != 0 {
			t.Errorf("node %d expanded before the resize: %q", i+1, e)
		}
	}

	// The resize, as the external resizer leaves it: a bigger PV, the claim
	// waiting for a node.
	n1.kubectl("", "patch", "pv", pvName, "--type=merge", "-p", `{"spec":{"capacity":{"storage":"2Gi"}}}`)
	n1.kubectl("", "patch", "pvc", "shared", "-n", n1.ns, "--subresource=status", "--type=merge", "-p",
		`{"status":{"allocatedResources":{"storage":"2Gi"},"allocatedResourceStatuses":{"storage":"NodeResizePending"}}}`)
	// A pod update makes node 1 sync pod a (and read its claim) now. Node 2
	// may sync pod b first for a reason of its own: then it takes the claim
	// and node 1 is the second.
	n1.kubectl("", "annotate", "pod", "a", "-n", n1.ns, "e2e.example.com/resized=yes")
	n1.poll(60*time.Second, "the claim resized by a node", func() (bool, string) {
		pvc, err := c.Client.CoreV1().PersistentVolumeClaims(n1.ns).Get(ctx, "shared", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		capacity := pvc.Status.Capacity[v1.ResourceStorage]
		return capacity.String() == "2Gi" && len(pvc.Status.AllocatedResourceStatuses) == 0,
			fmt.Sprintf("capacity %s, resize statuses %v", capacity.String(), pvc.Status.AllocatedResourceStatuses)
	})
	claim, err := c.Client.CoreV1().PersistentVolumeClaims(n1.ns).Get(ctx, "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodes := []*clusterNode{n1, n2}
	pods := []*v1.Pod{podA, podB}
	want := func(i int) []string {
		mount := filepath.Join(nodes[i].rootDir, "pods", string(pods[i].UID), "volumes", "kubernetes.io~csi", pvName, "mount")
		return []string{fmt.Sprintf("expand %s %s %d", pvName, mount, 2<<30)}
	}
	// Both nodes sync their pods: the node that did not take the claim
	// expands its own mount (mounted at 1Gi), once, and leaves the claim as
	// the other wrote it.
	for _, p := range pods {
		n1.kubectl("", "annotate", "pod", p.Name, "-n", n1.ns, "--overwrite", "e2e.example.com/resized=both")
	}
	for i, d := range drivers {
		n1.poll(60*time.Second, fmt.Sprintf("node %d expands its mount", i+1), func() (bool, string) {
			got := d.expansions()
			return slices.Equal(got, want(i)), fmt.Sprintf("%q; kubelet log:\n%s", got, nodes[i].kubeletLogLines("xpand"))
		})
	}
	n1.poll(30*time.Second, "FileSystemResizeSuccess events of both nodes", func() (bool, string) {
		evs, err := c.Client.CoreV1().Events(n1.ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FileSystemResizeSuccess"})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range evs.Items {
			seen = append(seen, e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name+": "+e.Message)
		}
		ok := true
		for i, n := range nodes {
			msg := fmt.Sprintf("MountVolume.NodeExpandVolume succeeded for volume %q %s", pvName, n.name)
			ok = ok && slices.Contains(seen, "Pod/"+pods[i].Name+": "+msg) && slices.Contains(seen, "PersistentVolumeClaim/shared: "+msg)
		}
		return ok, strings.Join(seen, "\n")
	})
	// More syncs of both pods expand nothing more. A spec change (a
	// deadline far off) makes each kubelet sync its pod, which it shows by
	// reporting the new generation as observed.
	for _, p := range pods {
		n1.kubectl("", "patch", "pod", p.Name, "-n", n1.ns, "--type=merge", "-p", `{"spec":{"activeDeadlineSeconds":360000}}`)
		n1.waitAPIPod(p.Name, 30*time.Second, "synced after the spec change", func(p *v1.Pod) bool {
			return p.Generation > 1 && p.Status.ObservedGeneration == p.Generation
		})
	}
	time.Sleep(time.Second) // the sync's volume step follows its status
	for i, d := range drivers {
		if got := d.expansions(); !slices.Equal(got, want(i)) {
			t.Errorf("node %d's expansions after more syncs %q, want %q", i+1, got, want(i))
		}
	}
	after, err := c.Client.CoreV1().PersistentVolumeClaims(n1.ns).Get(ctx, "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != claim.ResourceVersion {
		t.Errorf("the claim was written after the first node's resize: resourceVersion %s, then %s; status %+v",
			claim.ResourceVersion, after.ResourceVersion, after.Status)
	}

	n1.kubectl("", "delete", "pod", "a", "b", "-n", n1.ns, "--wait=false")
	for i, d := range drivers {
		n1.poll(60*time.Second, fmt.Sprintf("node %d unpublishes and unstages the volume", i+1), func() (bool, string) {
			calls := d.called()
			return slices.Contains(calls, "unpublish "+pvName) && slices.Contains(calls, "unstage "+pvName), strings.Join(calls, "\n")
		})
	}
}
