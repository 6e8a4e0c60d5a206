package volumes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// fakeClaims is an in-memory ClaimObjects.
type fakeClaims struct {
	pvcs map[string]*v1.PersistentVolumeClaim // "namespace/name"
	pvs  map[string]*v1.PersistentVolume
	gets int // claim reads
}

func (f *fakeClaims) GetPersistentVolumeClaim(_ context.Context, namespace, name string) (*v1.PersistentVolumeClaim, error) {
	f.gets++
	if c, ok := f.pvcs[namespace+"/"+name]; ok {
		return c.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumeclaims"}, name)
}

func (f *fakeClaims) GetPersistentVolume(_ context.Context, name string) (*v1.PersistentVolume, error) {
	if pv, ok := f.pvs[name]; ok {
		return pv.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumes"}, name)
}

// bind adds a claim bound to a PV of source src.
func (f *fakeClaims) bind(namespace, claim, pv string, src v1.PersistentVolumeSource, owner *metav1.OwnerReference) {
	uid := k8stypes.UID("pvc-uid-" + claim)
	c := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: claim, UID: uid},
		Spec:       v1.PersistentVolumeClaimSpec{VolumeName: pv},
		Status:     v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound},
	}
	if owner != nil {
		c.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	f.pvcs[namespace+"/"+claim] = c
	f.pvs[pv] = &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pv},
		Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: src,
			ClaimRef: &v1.ObjectReference{Namespace: namespace, Name: claim, UID: uid}},
	}
}

func newClaimsManager(t *testing.T, claims ClaimObjects) *Manager {
	t.Helper()
	root := t.TempDir()
	t.Cleanup(func() { detachAll(t, root) })
	m, err := New(Options{PodsDir: filepath.Join(root, "pods"), Claims: claims, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func claimVolume(name, claim string, readOnly bool) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: readOnly}}}
}

// TestMountVolumesLocalPV: a local PV is bind-mounted under the pod's
// kubernetes.io~local-volume/<pv> (read-only when the claim reference says
// so), given the fsGroup, listed by ClaimVolumes, and unmounted with the pod.
func TestMountVolumesLocalPV(t *testing.T) {
	t.Parallel()
	local := t.TempDir()
	if err := os.WriteFile(filepath.Join(local, "data"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	hostDir := t.TempDir()
	f := &fakeClaims{pvcs: map[string]*v1.PersistentVolumeClaim{}, pvs: map[string]*v1.PersistentVolume{}}
	f.bind("shop", "data", "pv-local", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: local}}, nil)
	f.bind("shop", "host", "pv-host", v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostDir}}, nil)
	m := newClaimsManager(t, f)
	pod := newPod("uid-claims", claimVolume("data", "data", false), claimVolume("host", "host", true), claimVolume("again", "data", true))
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](4321), FSGroupChangePolicy: ptr.To(v1.FSGroupChangeOnRootMismatch)}
	infos, err := m.MountVolumes(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(m.podsDir, "uid-claims", "volumes", LocalVolumePluginDir, "pv-local")
	if got := infos["data"]; got.HostPath != dir || got.ReadOnly || !got.Managed {
		t.Errorf("local volume info %+v, want %s read-write", got, dir)
	}
	if got := infos["host"]; got.HostPath != hostDir || !got.ReadOnly {
		t.Errorf("hostPath PV info %+v, want %s read-only", got, hostDir)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "data")); err != nil || string(b) != "x" {
		t.Errorf("the local path's file through the mount: %q %v", b, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(local, &st); err != nil || st.Gid != 4321 || st.Mode&syscall.S_ISGID == 0 {
		t.Errorf("local path after fsGroup: gid %d mode %o %v, want gid 4321 with setgid", st.Gid, st.Mode, err)
	}
	// A second sync finds it mounted and mounts nothing more, nor reads the
	// claims again.
	gets := f.gets
	if _, err := m.MountVolumes(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if f.gets != gets {
		t.Errorf("the second sync read the claims %d more times", f.gets-gets)
	}
	if mps := mustMountPoints(t, m.podDir("uid-claims")); len(mps) != 1 {
		t.Errorf("mounts after two syncs %v, want one", mps)
	}
	got := m.ClaimVolumes()["uid-claims"]
	if len(got) != 3 || got[0].Name != "again" || got[1].Name != "data" || got[1].Path != dir || got[1].Claim.Name != "data" ||
		got[2].Name != "host" || got[2].Path != "" || got[2].PV != "pv-host" {
		t.Errorf("ClaimVolumes = %+v", got)
	}
	if err := m.UnmountVolumes(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	if mps := mustMountPoints(t, m.podDir("uid-claims")); len(mps) != 0 {
		t.Errorf("left mounted: %v", mps)
	}
	if _, err := os.Stat(filepath.Join(local, "data")); err != nil {
		t.Errorf("the local volume's data after unmount: %v", err)
	}
	if len(m.ClaimVolumes()) != 0 {
		t.Errorf("ClaimVolumes after unmount = %v", m.ClaimVolumes())
	}
}

// TestMountVolumesLocalPVReadOnly: a claim reference with readOnly mounts
// the local volume read-only and leaves its ownership alone.
func TestMountVolumesLocalPVReadOnly(t *testing.T) {
	t.Parallel()
	local := t.TempDir()
	f := &fakeClaims{pvcs: map[string]*v1.PersistentVolumeClaim{}, pvs: map[string]*v1.PersistentVolume{}}
	f.bind("shop", "data", "pv-ro", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: local}}, nil)
	m := newClaimsManager(t, f)
	pod := newPod("uid-ro", claimVolume("data", "data", true))
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](4321)}
	infos, err := m.MountVolumes(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	if !infos["data"].ReadOnly {
		t.Error("read-only claim reference gave a writable volume")
	}
	if err := os.WriteFile(filepath.Join(infos["data"].HostPath, "f"), nil, 0o600); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("write through a read-only local volume: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(local, &st); err != nil || st.Gid == 4321 {
		t.Errorf("a read-only local volume got the fsGroup (gid %d, %v)", st.Gid, err)
	}
	if err := m.UnmountVolumes(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
}

// TestMountVolumesClaimErrors: upstream's messages for claims a pod cannot
// start on, which keep it waiting (ContainerCreating, FailedMount).
func TestMountVolumesClaimErrors(t *testing.T) {
	t.Parallel()
	f := &fakeClaims{pvcs: map[string]*v1.PersistentVolumeClaim{}, pvs: map[string]*v1.PersistentVolume{}}
	f.pvcs["shop/pending"] = &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "pending"},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending}}
	f.pvcs["shop/deleted"] = &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "deleted", DeletionTimestamp: &metav1.Time{}},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}, Spec: v1.PersistentVolumeClaimSpec{VolumeName: "x"}}
	f.bind("shop", "stolen", "pv-stolen", v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/"}}, nil)
	f.pvs["pv-stolen"].Spec.ClaimRef.UID = "someone-else"
	f.bind("shop", "iscsi", "pv-iscsi", v1.PersistentVolumeSource{ISCSI: &v1.ISCSIPersistentVolumeSource{TargetPortal: "p", IQN: "iqn.2001-04.com.example:t"}}, nil)
	f.bind("shop", "web-scratch", "pv-eph", v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/"}}, nil)
	f.bind("shop", "block", "pv-block", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: "/"}}, nil)
	f.pvs["pv-block"].Spec.VolumeMode = ptr.To(v1.PersistentVolumeBlock)
	m := newClaimsManager(t, f)
	pod := newPod("uid-bad", claimVolume("missing", "missing", false), claimVolume("pending", "pending", false),
		claimVolume("deleted", "deleted", false), claimVolume("stolen", "stolen", false), claimVolume("iscsi", "iscsi", false),
		claimVolume("block", "block", false),
		v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}})
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "block", MountPath: "/b"}}
	_, err := m.MountVolumes(context.Background(), pod)
	if err == nil {
		t.Fatal("MountVolumes succeeded")
	}
	for _, want := range []string{
		`volume "missing": error processing PVC shop/missing: failed to fetch PVC from API server: persistentvolumeclaims "missing" not found`,
		`volume "pending": error processing PVC shop/pending: PVC is not bound`,
		`volume "deleted": error processing PVC shop/deleted: PVC is being deleted`,
		`volume "stolen": error processing PVC shop/stolen: found PV object pv-stolen but its pv.Spec.ClaimRef.UID someone-else does not point to claim.UID pvc-uid-stolen`,
		`volume "iscsi": persistent volume pv-iscsi: iscsi volumes are not supported by this kubelet`,
		`volume "block": volume block has volumeMode Block, but is specified in volumeMounts`,
		`volume "scratch": PVC shop/web-scratch was not created for pod shop/web (pod is not owner)`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%s", want, err)
		}
	}
	if len(m.ClaimVolumes()) != 0 {
		t.Errorf("ClaimVolumes after failures = %v", m.ClaimVolumes())
	}
}

// TestMountVolumesGenericEphemeral: the claim <pod>-<volume> controlled by
// the pod is mounted like any claim.
func TestMountVolumesGenericEphemeral(t *testing.T) {
	t.Parallel()
	hostDir := t.TempDir()
	pod := newPod("uid-eph", v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}})
	f := &fakeClaims{pvcs: map[string]*v1.PersistentVolumeClaim{}, pvs: map[string]*v1.PersistentVolume{}}
	f.bind("shop", "web-scratch", "pv-eph", v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostDir}},
		&metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "web", UID: pod.UID, Controller: ptr.To(true)})
	m := newClaimsManager(t, f)
	infos, err := m.MountVolumes(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	if infos["scratch"].HostPath != hostDir {
		t.Errorf("ephemeral volume info %+v", infos["scratch"])
	}
}

func TestOwnershipMismatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if !ownershipMismatch(dir, 4321) {
		t.Error("a fresh directory matched gid 4321")
	}
	if err := setVolumeOwnershipPolicy(dir, ptr.To[int64](4321), ptr.To(v1.FSGroupChangeOnRootMismatch)); err != nil {
		t.Fatal(err)
	}
	if ownershipMismatch(dir, 4321) {
		t.Error("after the change the root still mismatches")
	}
	// OnRootMismatch skips the walk when the root matches: a file below keeps its group.
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(f, -1, 99); err != nil {
		t.Fatal(err)
	}
	if err := setVolumeOwnershipPolicy(dir, ptr.To[int64](4321), ptr.To(v1.FSGroupChangeOnRootMismatch)); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(f, &st); err != nil || st.Gid != 99 {
		t.Errorf("OnRootMismatch walked a matching volume: gid %d %v", st.Gid, err)
	}
	if err := setVolumeOwnershipPolicy(dir, ptr.To[int64](4321), nil); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(f, &st); err != nil || st.Gid != 4321 {
		t.Errorf("Always did not walk: gid %d %v", st.Gid, err)
	}
}

// TestBindMountOptions: the options a bind mount can take are applied on the
// remount; the others are returned.
func TestBindMountOptions(t *testing.T) {
	t.Parallel()
	src, root := t.TempDir(), t.TempDir()
	dir := filepath.Join(root, "m")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	ignored, err := bindMount(src, dir, false, []string{"noexec", "nosuid", "weird=1"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unmount(dir) }()
	if len(ignored) != 1 || ignored[0] != "weird=1" {
		t.Errorf("ignored %v, want weird=1", ignored)
	}
	data, err := os.ReadFile(mountInfoPath)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == dir {
			found = true
			if !strings.Contains(f[5], "noexec") || !strings.Contains(f[5], "nosuid") {
				t.Errorf("mount options %s, want noexec and nosuid", f[5])
			}
		}
	}
	if !found {
		t.Errorf("%s not mounted", dir)
	}
}
