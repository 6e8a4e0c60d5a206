//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// loopNodeDriver is the node service of a CSI driver of the test whose
// volumes are loop devices over files under dataDir (<volume ID>.img):
//   - block volumes: staged by attaching the file to a loop device,
//     published by bind-mounting the device node on the target file;
//   - filesystem volumes: staged by attaching and mounting (XFS, made at
//     the first stage) on the staging path, published by a bind mount;
//   - NodeExpandVolume re-reads the file's size into the loop device
//     (losetup -c) and, for a filesystem, grows it (xfs_growfs: growing a
//     mounted ext4 needs CAP_SYS_RESOURCE, which root lacks on this host).
//
// The test plays the controller: it grows the file, the PV's capacity and
// the claim's status, as the external resizer would.
type loopNodeDriver struct {
	csipb.UnimplementedNodeServer
	nodeID, dataDir string

	mu      sync.Mutex
	loops   map[string]string // volume ID -> /dev/loopN
	calls   []string
	expands []*csipb.NodeExpandVolumeRequest
}

func (d *loopNodeDriver) record(call string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, call)
}

func (d *loopNodeDriver) called() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

func (d *loopNodeDriver) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	rpc := func(t csipb.NodeServiceCapability_RPC_Type) *csipb.NodeServiceCapability {
		return &csipb.NodeServiceCapability{Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: t}}}
	}
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: []*csipb.NodeServiceCapability{
		rpc(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME), rpc(csipb.NodeServiceCapability_RPC_EXPAND_VOLUME)}}, nil
}

func (d *loopNodeDriver) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	return &csipb.NodeGetInfoResponse{NodeId: d.nodeID}, nil
}

func loopRun(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return "", status.Errorf(codes.Internal, "%s %v: %v: %s", name, args, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

func (d *loopNodeDriver) NodeStageVolume(_ context.Context, req *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	block := req.VolumeCapability.GetBlock() != nil
	d.record(fmt.Sprintf("stage %s %s block=%v", req.VolumeId, req.StagingTargetPath, block))
	img := filepath.Join(d.dataDir, req.VolumeId+".img")
	dev, err := loopRun("losetup", "--find", "--show", img)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.loops[req.VolumeId] = dev
	d.mu.Unlock()
	if block {
		return &csipb.NodeStageVolumeResponse{}, nil
	}
	if _, err := loopRun("blkid", dev); err != nil { // not formatted yet
		if _, err := loopRun("mkfs.xfs", "-q", dev); err != nil {
			return nil, err
		}
	}
	_, err = loopRun("mount", "-t", "xfs", dev, req.StagingTargetPath)
	return &csipb.NodeStageVolumeResponse{}, err
}

func (d *loopNodeDriver) NodeUnstageVolume(_ context.Context, req *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	d.record("unstage " + req.VolumeId)
	if err := unix.Unmount(req.StagingTargetPath, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return nil, err
	}
	d.mu.Lock()
	dev := d.loops[req.VolumeId]
	delete(d.loops, req.VolumeId)
	d.mu.Unlock()
	if dev != "" {
		if _, err := loopRun("losetup", "-d", dev); err != nil {
			return nil, err
		}
	}
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

func (d *loopNodeDriver) NodePublishVolume(_ context.Context, req *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	block := req.VolumeCapability.GetBlock() != nil
	d.record(fmt.Sprintf("publish %s %s block=%v", req.VolumeId, req.TargetPath, block))
	if !block {
		if err := os.MkdirAll(req.TargetPath, 0o750); err != nil {
			return nil, err
		}
		return &csipb.NodePublishVolumeResponse{}, unix.Mount(req.StagingTargetPath, req.TargetPath, "", unix.MS_BIND, "")
	}
	d.mu.Lock()
	dev := d.loops[req.VolumeId]
	d.mu.Unlock()
	f, err := os.OpenFile(req.TargetPath, os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		return nil, err
	}
	_ = f.Close()
	return &csipb.NodePublishVolumeResponse{}, unix.Mount(dev, req.TargetPath, "", unix.MS_BIND, "")
}

func (d *loopNodeDriver) NodeUnpublishVolume(_ context.Context, req *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	d.record("unpublish " + req.VolumeId + " " + req.TargetPath)
	if err := unix.Unmount(req.TargetPath, 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return nil, err
	}
	return &csipb.NodeUnpublishVolumeResponse{}, os.RemoveAll(req.TargetPath)
}

func (d *loopNodeDriver) NodeExpandVolume(_ context.Context, req *csipb.NodeExpandVolumeRequest) (*csipb.NodeExpandVolumeResponse, error) {
	d.mu.Lock()
	d.expands = append(d.expands, req)
	dev := d.loops[req.VolumeId]
	d.mu.Unlock()
	if _, err := loopRun("losetup", "-c", dev); err != nil {
		return nil, err
	}
	if req.VolumeCapability.GetBlock() == nil {
		if _, err := loopRun("xfs_growfs", req.VolumePath); err != nil {
			return nil, err
		}
	}
	size, err := loopRun("blockdev", "--getsize64", dev)
	if err != nil {
		return nil, err
	}
	n, _ := strconv.ParseInt(size, 10, 64)
	return &csipb.NodeExpandVolumeResponse{CapacityBytes: n}, nil
}

// testCSIBlockAndExpansion (issue 30 item 5): CSI volumes of volumeMode Block
// and the node's part of a volume expansion, with a CSI driver of the test
// over loop devices (real block devices, XFS, xfs_growfs).
//   - A pod gets a Block claim as /dev/xvda (volumeDevices) and a Filesystem
//     claim at /data: upstream's block paths (staging directory, publish
//     file, the pod's volumeDevices link), what the pod writes to the device
//     lands in the volume's file.
//   - Both claims are resized (the test grows the files and the PVs, and
//     marks the claims NodeResizePending as the external resizer does):
//     the kubelet calls NodeExpandVolume on the pod's mount and staging path
//     (filesystem) or the publish file (block), the pod sees the new sizes,
//     and the claims' status capacity becomes the new size with the resize
//     status cleared; FileSystemResizeSuccess events.
//   - Deleting the pod unpublishes and unstages both, and removes the
//     publish file and the link.
func testCSIBlockAndExpansion(t *testing.T, c *controlplane.Cluster) {
	const driver = "loop.csi.e2e.example.com"
	n := newClusterNode(t, c)
	n.extra = append(n.extra, "--client-ca-file="+c.CAFile) // kubectl exec
	n.createNamespace()
	n.start()
	n.waitNodeReady(90 * time.Second)
	ctx := context.Background()

	d := &loopNodeDriver{nodeID: "e2e-" + n.name, dataDir: filepath.Join(n.dir, "loop-data"), loops: map[string]string{}}
	if err := os.MkdirAll(d.dataDir, 0o750); err != nil {
		t.Fatal(err)
	}
	// Sparse files; XFS needs 300 MiB at least.
	blkID, fsID := "blk-"+n.ns, "fs-"+n.ns
	for id, size := range map[string]int64{blkID: 64 << 20, fsID: 320 << 20} {
		f, err := os.Create(filepath.Join(d.dataDir, id+".img"))
		if err == nil {
			err = f.Truncate(size)
			_ = f.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { // loop devices a failed test left attached
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, dev := range d.loops {
			_, _ = loopRun("losetup", "-d", dev)
		}
	})
	drvSock := filepath.Join(n.rootDir, "plugins", driver, "csi.sock")
	drv := grpc.NewServer()
	csipb.RegisterNodeServer(drv, d)
	serveUnix(t, drvSock, drv)
	registerCSIDriver(t, n, driver, drvSock)

	n.deleteAtEnd("csidriver/"+driver, "pv/"+blkID, "pv/"+fsID)
	n.applyYAML(fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: %[1]s}
spec: {attachRequired: false}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: %[2]s}
spec:
  capacity: {storage: 64Mi}
  volumeMode: Block
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  claimRef: {namespace: @NS@, name: blk}
  csi: {driver: %[1]s, volumeHandle: %[2]s}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: blk, namespace: @NS@}
spec:
  volumeMode: Block
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: %[2]s
  resources: {requests: {storage: 64Mi}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: %[3]s}
spec:
  capacity: {storage: 320Mi}
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  claimRef: {namespace: @NS@, name: fs}
  csi: {driver: %[1]s, volumeHandle: %[3]s, fsType: xfs}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: fs, namespace: @NS@}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: %[3]s
  resources: {requests: {storage: 320Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: disks, namespace: @NS@}
spec:
  nodeName: %[4]s
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: @IMAGE@
    imagePullPolicy: Never
    command: [sh, -c, "echo hello-block | dd of=/dev/xvda conv=notrunc,fsync 2>/dev/null && echo fs > /data/hello && sleep 3600"]
    volumeDevices: [{name: blk, devicePath: /dev/xvda}]
    volumeMounts: [{name: fs, mountPath: /data}]
  volumes:
  - {name: blk, persistentVolumeClaim: {claimName: blk}}
  - {name: fs, persistentVolumeClaim: {claimName: fs}}
`, driver, blkID, fsID, n.name))
	pod := n.waitAPIPod("disks", 120*time.Second, "running with its block and filesystem volumes", runningAndReady)

	devDir := filepath.Join(n.rootDir, "plugins", "kubernetes.io/csi", "volumeDevices")
	publish := filepath.Join(devDir, "publish", blkID, string(pod.UID))
	link := filepath.Join(n.rootDir, "pods", string(pod.UID), "volumeDevices", "kubernetes.io~csi", blkID)
	fsTarget := filepath.Join(n.rootDir, "pods", string(pod.UID), "volumes", "kubernetes.io~csi", fsID, "mount")
	calls := d.called()
	for _, want := range []string{
		"stage " + blkID + " " + filepath.Join(devDir, "staging", blkID) + " block=true",
		"publish " + blkID + " " + publish + " block=true",
		"publish " + fsID + " " + fsTarget + " block=false",
	} {
		if !slices.Contains(calls, want) {
			t.Errorf("driver calls %q lack %q", calls, want)
		}
	}
	if got, err := os.Readlink(link); err != nil || got != publish {
		t.Errorf("pod device link %s -> %q (%v), want %s", link, got, err, publish)
	}
	// Upstream's global map path: the device bind-mounted on the pod's file,
	// a loop device on that file (the descriptor lock).
	mapFile := filepath.Join(devDir, blkID, "dev", string(pod.UID))
	t.Cleanup(func() { // the kubelet's loop device, if a failed test left it
		for _, l := range loopsBackedBy(mapFile) {
			_, _ = loopRun("losetup", "-d", "/dev/"+l)
		}
	})
	if fi, err := os.Stat(mapFile); err != nil || fi.Mode()&os.ModeDevice == 0 {
		t.Errorf("global map file %s: %v %v, want the block device", mapFile, fi, err)
	}
	if l := loopsBackedBy(mapFile); len(l) != 1 {
		t.Errorf("loop devices on %s: %q, want one", mapFile, l)
	}
	// The pod syncs its write (dd conv=fsync): the kubelet's loop device
	// holds the device open, so the pod's close is not the last one, which
	// would flush it (as with upstream's kubelet).
	n.poll(30*time.Second, "the pod's write to /dev/xvda in the block volume's file", func() (bool, string) {
		b := make([]byte, 11)
		f, err := os.Open(filepath.Join(d.dataDir, blkID+".img"))
		if err != nil {
			return false, err.Error()
		}
		defer f.Close()
		_, _ = f.ReadAt(b, 0)
		return string(b) == "hello-block", fmt.Sprintf("%q", b)
	})
	if out, err := n.execIn("disks", "blockdev", "--getsize64", "/dev/xvda"); err != nil || strings.TrimSpace(out) != strconv.Itoa(64<<20) {
		t.Errorf("size of /dev/xvda in the pod: %q %v", out, err)
	}

	// The resize, as the external resizer would leave it: bigger volumes
	// and PVs, the claims waiting for the node.
	newSizes := map[string]string{"blk": "128Mi", "fs": "512Mi"}
	for id, size := range map[string]int64{blkID: 128 << 20, fsID: 512 << 20} {
		if err := os.Truncate(filepath.Join(d.dataDir, id+".img"), size); err != nil {
			t.Fatal(err)
		}
		n.kubectl("", "patch", "pv", id, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"capacity":{"storage":"%dMi"}}}`, size>>20))
	}
	for claim, size := range newSizes {
		n.kubectl("", "patch", "pvc", claim, "-n", n.ns, "--subresource=status", "--type=merge", "-p",
			fmt.Sprintf(`{"status":{"allocatedResources":{"storage":%q},"allocatedResourceStatuses":{"storage":"NodeResizePending"}}}`, size))
	}
	// A pod update makes the kubelet sync the pod (and read its claims) now.
	n.kubectl("", "annotate", "pod", "disks", "-n", n.ns, "e2e.example.com/resized=yes")
	for _, claim := range []string{"blk", "fs"} {
		n.poll(60*time.Second, "claim "+claim+" resized by the node", func() (bool, string) {
			pvc, err := c.Client.CoreV1().PersistentVolumeClaims(n.ns).Get(ctx, claim, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			capacity := pvc.Status.Capacity[v1.ResourceStorage]
			return capacity.String() == newSizes[claim] && len(pvc.Status.AllocatedResourceStatuses) == 0,
				fmt.Sprintf("capacity %s, resize statuses %v, conditions %v", capacity.String(), pvc.Status.AllocatedResourceStatuses, pvc.Status.Conditions)
		})
	}
	d.mu.Lock()
	expands := slices.Clone(d.expands)
	d.mu.Unlock()
	for _, want := range []struct {
		id, path, staging string
		size              int64
	}{
		{blkID, publish, filepath.Join(devDir, "staging", blkID), 128 << 20},
		{fsID, fsTarget, "", 512 << 20},
	} {
		found := slices.ContainsFunc(expands, func(r *csipb.NodeExpandVolumeRequest) bool {
			return r.VolumeId == want.id && r.VolumePath == want.path && r.CapacityRange.GetRequiredBytes() == want.size &&
				(want.staging == "" || r.StagingTargetPath == want.staging) && r.StagingTargetPath != ""
		})
		if !found {
			t.Errorf("no NodeExpandVolume of %s on %s for %d bytes: %v", want.id, want.path, want.size, expands)
		}
	}
	if out, err := n.execIn("disks", "blockdev", "--getsize64", "/dev/xvda"); err != nil || strings.TrimSpace(out) != strconv.Itoa(128<<20) {
		t.Errorf("size of /dev/xvda in the pod after the resize: %q %v", out, err)
	}
	out, err := n.execIn("disks", "df", "-k", "/data")
	if fields := strings.Fields(out); err != nil || len(fields) < 9 || atoi(fields[8]) < 400<<10 {
		t.Errorf("df /data in the pod after the resize (want > 400 MiB): %q %v", out, err)
	}
	n.poll(30*time.Second, "FileSystemResizeSuccess events", func() (bool, string) {
		evs, err := c.Client.CoreV1().Events(n.ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FileSystemResizeSuccess"})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range evs.Items {
			seen = append(seen, e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name+": "+e.Message)
		}
		want := fmt.Sprintf("Pod/disks: MountVolume.NodeExpandVolume succeeded for volume %q %s", fsID, n.name)
		return slices.Contains(seen, want) && slices.Contains(seen, fmt.Sprintf("PersistentVolumeClaim/blk: MountVolume.NodeExpandVolume succeeded for volume %q %s", blkID, n.name)),
			strings.Join(seen, "\n")
	})

	n.kubectl("", "delete", "pod", "disks", "-n", n.ns, "--wait=false")
	n.poll(60*time.Second, "both volumes unpublished and unstaged", func() (bool, string) {
		calls := d.called()
		ok := slices.Contains(calls, "unpublish "+blkID+" "+publish) && slices.Contains(calls, "unstage "+blkID) &&
			slices.Contains(calls, "unstage "+fsID)
		return ok, strings.Join(calls, "\n")
	})
	n.poll(30*time.Second, "the publish file, the pod's link, the map file and its loop device removed", func() (bool, string) {
		_, e1 := os.Lstat(publish)
		_, e2 := os.Lstat(link)
		_, e3 := os.Lstat(mapFile)
		loops := loopsBackedBy(mapFile)
		return os.IsNotExist(e1) && os.IsNotExist(e2) && os.IsNotExist(e3) && len(loops) == 0, fmt.Sprintf("%v %v %v %q", e1, e2, e3, loops)
	})
}

// loopsBackedBy lists the loop devices whose backing file is path.
func loopsBackedBy(path string) []string {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var loops []string
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && strings.TrimSpace(string(b)) == path {
			loops = append(loops, filepath.Base(filepath.Dir(filepath.Dir(f))))
		}
	}
	return loops
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
