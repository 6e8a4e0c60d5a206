package volumes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// newObjectsTestManager is newTestManager with a fake API and a fake clock.
func newObjectsTestManager(t *testing.T) (*Manager, *fakeObjects, *clocktesting.FakeClock) {
	t.Helper()
	root := t.TempDir()
	t.Cleanup(func() { detachAll(t, root) })
	clk := clocktesting.NewFakeClock(time.Now())
	objs := newFakeObjects(clk)
	m, err := New(Options{PodsDir: filepath.Join(root, "pods"), Allocatable: fixedAllocatable(testAllocatable),
		Objects: objs, Clock: clk, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, objs, clk
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func dataLink(t *testing.T, dir string) string {
	t.Helper()
	d, err := os.Readlink(filepath.Join(dir, dataDirName))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func fileMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func configMapVolume(name, cm string) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: cm}}}}
}

func TestMountVolumesConfigMapUpdates(t *testing.T) {
	t.Parallel()
	m, objs, _ := newObjectsTestManager(t)
	ctx := context.Background()
	objs.addConfigMap("shop", "cfg", map[string]string{"app.conf": "v1", "old": "x"}, nil)
	pod := newPod("uid-cm", configMapVolume("config", "cfg"))

	infos, err := m.MountVolumes(ctx, pod)
	if err != nil {
		t.Fatalf("MountVolumes: %v", err)
	}
	dir := filepath.Join(m.podsDir, "uid-cm", "volumes", "kubernetes.io~configmap", "config")
	if infos["config"] != (VolumeInfo{HostPath: dir, ReadOnly: true, Managed: true}) {
		t.Fatalf("info %+v", infos["config"])
	}
	if fs := mustFSType(t, dir); fs != "" {
		t.Errorf("configMap volume is a %s mount, want a plain directory", fs)
	}
	if got := readFile(t, filepath.Join(dir, "app.conf")); got != "v1" {
		t.Errorf("app.conf = %q", got)
	}
	if mode := fileMode(t, filepath.Join(dir, "app.conf")); mode != 0o644 {
		t.Errorf("mode %v, want 0644", mode)
	}
	first := dataLink(t, dir)

	// An unchanged configMap is not rewritten.
	if _, err := m.MountVolumes(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if d := dataLink(t, dir); d != first {
		t.Errorf("unchanged resync moved ..data %s -> %s", first, d)
	}

	// A changed one is, atomically; a removed key disappears.
	objs.addConfigMap("shop", "cfg", map[string]string{"app.conf": "v2", "new": "y"}, nil)
	if _, err := m.MountVolumes(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if d := dataLink(t, dir); d == first {
		t.Error("..data did not move after an update")
	}
	if got := readFile(t, filepath.Join(dir, "app.conf")); got != "v2" {
		t.Errorf("app.conf after update = %q", got)
	}
	if got := readFile(t, filepath.Join(dir, "new")); got != "y" {
		t.Errorf("new = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, "old")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("removed key still visible: %v", err)
	}

	if err := m.UnmountVolumes(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("volume still there: %v", err)
	}
}

func TestMountVolumesSecretOnTmpfs(t *testing.T) {
	t.Parallel()
	m, objs, _ := newObjectsTestManager(t)
	ctx := context.Background()
	objs.addSecret("shop", "creds", map[string][]byte{"user": []byte("admin"), "pass": []byte("s3cret")})
	pod := newPod("uid-secret", v1.Volume{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{
		SecretName:  "creds",
		DefaultMode: ptrTo(int32(0o400)),
		Items:       []v1.KeyToPath{{Key: "user", Path: "auth/user"}, {Key: "pass", Path: "auth/pass", Mode: ptrTo(int32(0o440))}},
	}}})
	infos, err := m.MountVolumes(ctx, pod)
	if err != nil {
		t.Fatalf("MountVolumes: %v", err)
	}
	dir := infos["creds"].HostPath
	if want := filepath.Join(m.podsDir, "uid-secret", "volumes", "kubernetes.io~secret", "creds"); dir != want {
		t.Fatalf("HostPath %s, want %s", dir, want)
	}
	if fs := mustFSType(t, dir); fs != "tmpfs" {
		t.Fatalf("secret volume on %q, want tmpfs", fs)
	}
	// Memory-backed volumes are sized like emptyDir medium Memory (8Gi allocatable here).
	if opts := mountSuperOptions(t, dir); !strings.Contains(opts, "size=8388608k") {
		t.Errorf("tmpfs options %q, want size=8388608k", opts)
	}
	for path, want := range map[string]struct {
		data string
		mode os.FileMode
	}{"auth/user": {"admin", 0o400}, "auth/pass": {"s3cret", 0o440}} {
		if got := readFile(t, filepath.Join(dir, path)); got != want.data {
			t.Errorf("%s = %q, want %q", path, got, want.data)
		}
		if mode := fileMode(t, filepath.Join(dir, path)); mode != want.mode {
			t.Errorf("%s mode %v, want %v", path, mode, want.mode)
		}
	}
	// A resync keeps the one tmpfs.
	if _, err := m.MountVolumes(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if mps := mustMountPoints(t, dir); len(mps) != 1 {
		t.Errorf("mounts after resync %v, want one", mps)
	}
	if err := m.UnmountVolumes(ctx, pod.UID); err != nil {
		t.Fatalf("UnmountVolumes: %v", err)
	}
	if mps := mustMountPoints(t, m.podsDir); len(mps) != 0 {
		t.Fatalf("still mounted: %v", mps)
	}
}

func TestMountVolumesProjectedKubeAPIAccess(t *testing.T) {
	t.Parallel()
	m, objs, clk := newObjectsTestManager(t)
	ctx := context.Background()
	objs.addConfigMap("shop", "kube-root-ca.crt", map[string]string{"ca.crt": "-----BEGIN CERTIFICATE-----"}, nil)
	vol := kubeAPIAccess()
	pod := newPod("uid-kaa", vol)
	pod.Spec.ServiceAccountName = "default"
	gid := int64(3456)
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &gid}

	infos, err := m.MountVolumes(ctx, pod)
	if err != nil {
		t.Fatalf("MountVolumes: %v", err)
	}
	dir := infos[vol.Name].HostPath
	if want := filepath.Join(m.podsDir, "uid-kaa", "volumes", "kubernetes.io~projected", vol.Name); dir != want {
		t.Fatalf("HostPath %s, want %s", dir, want)
	}
	if fs := mustFSType(t, dir); fs != "tmpfs" {
		t.Fatalf("projected volume on %q, want tmpfs", fs)
	}
	for path, want := range map[string]string{"token": "token-1", "ca.crt": "-----BEGIN CERTIFICATE-----", "namespace": "shop"} {
		if got := readFile(t, filepath.Join(dir, path)); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	// With an fsGroup the token is 0600 + group read; the others 0644 + group read.
	for path, want := range map[string]os.FileMode{"token": 0o640, "ca.crt": 0o644, "namespace": 0o644} {
		fi, err := os.Stat(filepath.Join(dir, path))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want || fi.Sys().(*syscall.Stat_t).Gid != uint32(gid) {
			t.Errorf("%s: mode %v gid %d, want %v gid %d", path, fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Gid, want, gid)
		}
	}
	first := dataLink(t, dir)

	// Ten seconds later the cached token is reused: nothing is rewritten.
	clk.Step(10 * time.Second)
	if _, err := m.MountVolumes(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if d := dataLink(t, dir); d != first {
		t.Errorf("resync with a fresh token rewrote the volume")
	}
	// At 80% of its 3607 s lifetime the token is rotated.
	clk.Step(2890 * time.Second)
	if _, err := m.MountVolumes(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "token")); got != "token-2" {
		t.Errorf("token after 80%% of its lifetime = %q, want token-2", got)
	}
	if n := len(objs.tokenRequests()); n != 2 {
		t.Errorf("%d TokenRequests, want 2", n)
	}

	// Teardown unmounts the tmpfs and forgets the pod's token.
	if err := m.UnmountVolumes(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if mps := mustMountPoints(t, m.podsDir); len(mps) != 0 {
		t.Fatalf("still mounted: %v", mps)
	}
	m.tokens.mu.Lock()
	left := len(m.tokens.tokens)
	m.tokens.mu.Unlock()
	if left != 0 {
		t.Errorf("%d tokens cached after UnmountVolumes", left)
	}
}

func TestMountVolumesObjectMissing(t *testing.T) {
	t.Parallel()
	m, objs, _ := newObjectsTestManager(t)
	ctx := context.Background()
	objs.addConfigMap("shop", "cfg", map[string]string{"a": "1"}, nil)
	withKey := configMapVolume("keyed", "cfg")
	withKey.ConfigMap.Items = []v1.KeyToPath{{Key: "missing", Path: "m"}}
	pod := newPod("uid-missing",
		configMapVolume("config", "nope"),
		v1.Volume{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "nope"}}},
		withKey,
	)
	_, err := m.MountVolumes(ctx, pod)
	if err == nil {
		t.Fatal("MountVolumes succeeded with missing objects")
	}
	for _, want := range []string{
		`volume "config": configmap "nope" not found`,
		`volume "creds": secret "nope" not found`,
		`volume "keyed": configmap "cfg" references non-existent config key: missing`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := os.Stat(m.podDir(pod.UID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("failing volumes created the pod dir: %v", err)
	}

	// Optional: an empty volume.
	optional := newPod("uid-optional",
		v1.Volume{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Optional: ptrTo(true)}}},
		v1.Volume{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "nope", Optional: ptrTo(true)}}},
	)
	infos, err := m.MountVolumes(ctx, optional)
	if err != nil {
		t.Fatalf("optional volumes: %v", err)
	}
	if len(infos) != 2 || infos["config"].HostPath == "" || infos["creds"].HostPath == "" {
		t.Fatalf("infos %+v, want config and creds", infos)
	}
	for name, info := range infos {
		entries, err := os.ReadDir(info.HostPath)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), "..") {
				t.Errorf("%s: unexpected file %s in an empty optional volume", name, e.Name())
			}
		}
	}
	// The optional object appears: its files show up on the next sync.
	objs.addConfigMap("shop", "nope", map[string]string{"late": "yes"}, nil)
	if _, err := m.MountVolumes(ctx, optional); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(infos["config"].HostPath, "late")); got != "yes" {
		t.Errorf("late = %q", got)
	}
	if err := m.UnmountVolumes(ctx, optional.UID); err != nil {
		t.Fatal(err)
	}
}

// Once a volume holds data, a failed refresh keeps it and does not fail the sync.
func TestMountVolumesObjectKeepsDataOnRefreshError(t *testing.T) {
	t.Parallel()
	m, objs, _ := newObjectsTestManager(t)
	ctx := context.Background()
	objs.addConfigMap("shop", "cfg", map[string]string{"a": "1"}, nil)
	pod := newPod("uid-keep", configMapVolume("config", "cfg"))
	infos, err := m.MountVolumes(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(infos["config"].HostPath, "a")
	for _, tc := range []struct {
		desc     string
		breakAPI func()
	}{
		{desc: "API down", breakAPI: func() { objs.setErr(errors.New("connection refused")) }},
		{desc: "object deleted", breakAPI: func() { objs.setErr(nil); objs.deleteConfigMap("shop", "cfg") }},
	} {
		tc.breakAPI()
		got, err := m.MountVolumes(ctx, pod)
		if err != nil {
			t.Errorf("%s: MountVolumes: %v", tc.desc, err)
		}
		if got["config"] != infos["config"] {
			t.Errorf("%s: info %+v", tc.desc, got["config"])
		}
		if data := readFile(t, path); data != "1" {
			t.Errorf("%s: content %q", tc.desc, data)
		}
	}
	if err := m.UnmountVolumes(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
}

func TestMountVolumesWithObjectsStillRefusesOthers(t *testing.T) {
	t.Parallel()
	m, _, _ := newObjectsTestManager(t)
	pod := newPod("uid-pvc", v1.Volume{Name: "claim", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}})
	if _, err := m.MountVolumes(context.Background(), pod); !errors.Is(err, ErrUnsupportedVolume) {
		t.Fatalf("err = %v, want ErrUnsupportedVolume", err)
	}
}

func TestCleanupOrphansObjectVolumes(t *testing.T) {
	t.Parallel()
	m, objs, _ := newObjectsTestManager(t)
	ctx := context.Background()
	objs.addConfigMap("shop", "kube-root-ca.crt", map[string]string{"ca.crt": "PEM"}, nil)
	objs.addConfigMap("shop", "cfg", map[string]string{"a": "1"}, nil)
	objs.addSecret("shop", "creds", map[string][]byte{"k": []byte("v")})
	pod := newPod("uid-orphan-objs", kubeAPIAccess(), configMapVolume("config", "cfg"),
		v1.Volume{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "creds"}}})
	pod.Spec.ServiceAccountName = "default"
	if _, err := m.MountVolumes(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if mps := mustMountPoints(t, m.podDir(pod.UID)); len(mps) != 2 {
		t.Fatalf("mounts %v, want the secret and projected tmpfs", mps)
	}
	if err := m.CleanupOrphans(ctx, map[k8stypes.UID]bool{}); err != nil {
		t.Fatalf("CleanupOrphans: %v", err)
	}
	if mps := mustMountPoints(t, m.podsDir); len(mps) != 0 {
		t.Errorf("still mounted: %v", mps)
	}
	if _, err := os.Stat(m.podDir(pod.UID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pod dir still there: %v", err)
	}
	m.tokens.mu.Lock()
	left := len(m.tokens.tokens)
	m.tokens.mu.Unlock()
	if left != 0 {
		t.Errorf("%d tokens cached after the orphan was removed", left)
	}
}
