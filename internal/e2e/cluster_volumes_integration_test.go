//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// testPersistentVolumes (issue 16 items 1 and 6) runs the claims a small
// cluster's storage gives, through the real control plane:
//   - a StatefulSet whose volumeClaimTemplate the scheduler binds to a local
//     PV of this node (no-provisioner class, WaitForFirstConsumer): the PV's
//     directory is bind-mounted for the pod, gets its fsGroup (setgid, group
//     2000), is written through the claim and through a subPath of it, and is
//     reported in /stats/summary with its claim and as
//     kubelet_volume_stats_* in /metrics; the mount goes with the pod;
//   - a pod whose claim is not bound waits in ContainerCreating with a
//     FailedMount event naming "PVC is not bound", and starts once a hostPath
//     PV is created and the PV controller binds it; its readOnly claim
//     reference makes the volume read-only;
//   - a generic ephemeral volume: the claim <pod>-<volume> the controller
//     creates for the pod is bound to a pre-bound PV and mounted;
//   - a volumeMode Block local PV (a loop device) is the container's
//     volumeDevices device.
func testPersistentVolumes(t *testing.T, c *controlplane.Cluster) {
	n := newAPINode(t, c)
	ctx := context.Background()

	class := "local-" + n.ns
	localDir := filepath.Join(n.dir, "local-pv")
	hostDir := filepath.Join(n.dir, "host-pv")
	ephDir := filepath.Join(n.dir, "eph-pv")
	if err := os.Mkdir(localDir, 0o755); err != nil {
		t.Fatal(err)
	}
	n.deleteAtEnd("storageclass/"+class, "pv/local-"+n.ns, "pv/later-"+n.ns, "pv/eph-"+n.ns)
	n.applyYAML(fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: %[1]s}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: local-@NS@}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: %[1]s
  local: {path: %[2]s}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: kubernetes.io/hostname, operator: In, values: [%[3]s]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: @NS@}
spec:
  serviceName: web
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      securityContext: {fsGroup: 2000, fsGroupChangePolicy: OnRootMismatch}
      containers:
      - name: main
        image: @IMAGE@
        imagePullPolicy: Never
        command: [sh, -c, "echo hello > /data/greeting && echo sub > /sub/file && sleep 3600"]
        volumeMounts:
        - {name: data, mountPath: /data}
        - {name: data, mountPath: /sub, subPath: part}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      storageClassName: %[1]s
      resources: {requests: {storage: 1Gi}}
`, class, localDir, n.name))
	web := n.waitAPIPod("web-0", 120*time.Second, "running", runningAndReady)
	n.poll(30*time.Second, "the StatefulSet's pod wrote through its claim and the subPath", func() (bool, string) {
		g, err1 := os.ReadFile(filepath.Join(localDir, "greeting"))
		s, err2 := os.ReadFile(filepath.Join(localDir, "part", "file"))
		return string(g) == "hello\n" && string(s) == "sub\n", fmt.Sprintf("%q %v %q %v", g, err1, s, err2)
	})
	var st syscall.Stat_t
	if err := syscall.Stat(localDir, &st); err != nil || st.Gid != 2000 || st.Mode&syscall.S_ISGID == 0 {
		t.Errorf("local PV directory after fsGroup 2000: gid %d mode %o %v, want gid 2000 and setgid", st.Gid, st.Mode, err)
	}
	mountDir := filepath.Join(n.rootDir, "pods", string(web.UID), "volumes", "kubernetes.io~local-volume", "local-"+n.ns)
	if fs := mountsAt(t, mountDir); len(fs) != 1 {
		t.Errorf("mounts at %s: %v, want the local PV's bind mount", mountDir, fs)
	}

	cred := apiServerCred(t, c)
	claim := "data-web-0"
	n.poll(60*time.Second, "/stats/summary reports the claim volume of web-0", func() (bool, string) {
		code, body := n.kubeletDo("GET", "/stats/summary", cred)
		if code != 200 {
			return false, fmt.Sprintf("%d %.200s", code, body)
		}
		var s statsv1alpha1.Summary
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			return false, err.Error()
		}
		for _, p := range s.Pods {
			if p.PodRef.UID != string(web.UID) {
				continue
			}
			for _, v := range p.VolumeStats {
				if v.Name == "data" && v.PVCRef != nil && v.PVCRef.Name == claim && v.PVCRef.Namespace == n.ns &&
					v.CapacityBytes != nil && *v.CapacityBytes > 0 && v.UsedBytes != nil && v.InodesUsed != nil {
					return true, ""
				}
			}
			return false, fmt.Sprintf("volume stats %+v", p.VolumeStats)
		}
		return false, "web-0 not in the summary"
	})
	code, metrics := n.kubeletDo("GET", "/metrics", cred)
	checkUpstreamMetrics(t, metrics, false)
	for _, fam := range []string{"capacity_bytes", "available_bytes", "used_bytes", "inodes", "inodes_free", "inodes_used"} {
		want := fmt.Sprintf(`kubelet_volume_stats_%s{namespace=%q,persistentvolumeclaim=%q} `, fam, n.ns, claim)
		if code != 200 || !strings.Contains(metrics, want) {
			t.Errorf("/metrics (%d) lacks %s", code, want)
		}
	}

	// A claim that is not bound keeps its pod waiting.
	n.applyYAML(fmt.Sprintf(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: later, namespace: @NS@}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  resources: {requests: {storage: 1Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: waiter, namespace: @NS@}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: @IMAGE@
    imagePullPolicy: Never
    command: [sh, -c, "touch /x/f 2>/dev/null && echo writable || echo read-only; sleep 3600"]
    volumeMounts: [{name: x, mountPath: /x}]
  volumes:
  - name: x
    persistentVolumeClaim: {claimName: later, readOnly: true}
`, n.name))
	waiter := n.waitAPIPod("waiter", 60*time.Second, "waiting in ContainerCreating", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "ContainerCreating"
	})
	n.poll(60*time.Second, "the waiter's FailedMount event names the unbound claim", func() (bool, string) {
		evs, err := c.Client.CoreV1().Events(n.ns).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.uid=" + string(waiter.UID) + ",reason=FailedMount"})
		if err != nil || len(evs.Items) == 0 {
			return false, fmt.Sprint("no event ", err)
		}
		m := evs.Items[0].Message
		return evs.Items[0].Type == v1.EventTypeWarning && strings.HasPrefix(m, "Unable to attach or mount volumes: ") &&
			strings.Contains(m, fmt.Sprintf("error processing PVC %s/later: PVC is not bound", n.ns)), m
	})
	if ids := n.containers(true, "io.kubernetes.pod.uid="+string(waiter.UID)); len(ids) != 0 {
		t.Errorf("the waiting pod has containers: %v", ids)
	}
	n.applyYAML(fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata: {name: later-@NS@}
spec:
  capacity: {storage: 1Mi}
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  claimRef: {namespace: @NS@, name: later}
  hostPath: {path: %s, type: DirectoryOrCreate}
`, hostDir))
	waiter = n.waitAPIPod("waiter", 120*time.Second, "running once its claim is bound", runningAndReady)
	n.waitLog(waiter, "main", "read-only", 30*time.Second)

	// A generic ephemeral volume: the controller's claim, pre-bound to a PV.
	n.applyYAML(fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata: {name: eph-@NS@}
spec:
  capacity: {storage: 1Mi}
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  claimRef: {namespace: @NS@, name: eph-scratch}
  hostPath: {path: %s, type: DirectoryOrCreate}
---
apiVersion: v1
kind: Pod
metadata: {name: eph, namespace: @NS@}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: @IMAGE@
    imagePullPolicy: Never
    command: [sh, -c, "echo scratch > /scratch/f && sleep 3600"]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
  volumes:
  - name: scratch
    ephemeral:
      volumeClaimTemplate:
        spec:
          accessModes: [ReadWriteOnce]
          storageClassName: ""
          resources: {requests: {storage: 1Mi}}
`, ephDir, n.name))
	n.waitAPIPod("eph", 120*time.Second, "running on its ephemeral claim", runningAndReady)
	n.poll(30*time.Second, "the ephemeral volume's file on the PV", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(ephDir, "f"))
		return string(b) == "scratch\n", fmt.Sprintf("%q %v", b, err)
	})

	checkLocalBlockVolume(n)

	// The local PV's mount goes with the StatefulSet's pod; its data stays.
	n.kubectl("", "-n", n.ns, "delete", "statefulset", "web", "--wait=false")
	n.waitAPIPodGone("web-0", string(web.UID), 60*time.Second)
	n.poll(30*time.Second, "the local PV unmounted from web-0's directory", func() (bool, string) {
		fs := mountsAt(t, mountDir)
		return len(fs) == 0, fmt.Sprint(fs)
	})
	if b, err := os.ReadFile(filepath.Join(localDir, "greeting")); err != nil || string(b) != "hello\n" {
		t.Errorf("the local PV's data after the pod went: %q %v", b, err)
	}
}

// mountsAt lists the file system types mounted exactly at dir.
func mountsAt(t testing.TB, dir string) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == dir {
			out = append(out, line)
		}
	}
	return out
}

// checkLocalBlockVolume: a volumeMode Block local PV on a loop device of the
// test reaches the container as the block device at its volumeDevices path.
func checkLocalBlockVolume(n *clusterNode) {
	t := n.t
	img := filepath.Join(n.dir, "block.img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(8 << 20); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := run(ctx, "losetup", "--find", "--show", img)
	if err != nil {
		t.Fatalf("losetup: %v: %s", err, out)
	}
	loop := strings.TrimSpace(out)
	t.Cleanup(func() { _, _ = run(context.Background(), "losetup", "-d", loop) })
	n.deleteAtEnd("pv/block-" + n.ns)
	n.applyYAML(fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata: {name: block-@NS@}
spec:
  capacity: {storage: 8Mi}
  accessModes: [ReadWriteOnce]
  volumeMode: Block
  storageClassName: ""
  claimRef: {namespace: @NS@, name: raw}
  local: {path: %[1]s}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: kubernetes.io/hostname, operator: In, values: [%[2]s]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: raw, namespace: @NS@}
spec:
  accessModes: [ReadWriteOnce]
  volumeMode: Block
  storageClassName: ""
  resources: {requests: {storage: 8Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: raw-user, namespace: @NS@}
spec:
  nodeName: %[2]s
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: @IMAGE@
    imagePullPolicy: Never
    command: [sh, -c, "ls -l /dev/xvda && echo block-data | dd of=/dev/xvda bs=512 count=1 conv=sync,fsync 2>/dev/null && echo wrote; sleep 3600"]
    volumeDevices: [{name: raw, devicePath: /dev/xvda}]
  volumes:
  - name: raw
    persistentVolumeClaim: {claimName: raw}
`, loop, n.name))
	pod := n.waitAPIPod("raw-user", 120*time.Second, "running with its block volume", runningAndReady)
	log := n.waitLog(pod, "main", "wrote", 30*time.Second)
	if !strings.HasPrefix(log, "b") {
		t.Errorf("/dev/xvda in the container is not a block device:\n%s", log)
	}
	b, err := os.ReadFile(img)
	if err != nil || !strings.HasPrefix(string(b), "block-data\n") {
		t.Errorf("the loop device's first block: %.20q %v", b, err)
	}
}

// deleteAtEnd deletes cluster-scoped objects (kind/name, as kubectl names
// them) when the test ends; namespaced ones go with n.ns.
func (n *clusterNode) deleteAtEnd(objs ...string) {
	n.t.Cleanup(func() {
		for _, obj := range objs {
			_, _ = n.c.KubectlRun(context.Background(), "", "delete", "--ignore-not-found", "--wait=false", obj)
		}
	})
}
