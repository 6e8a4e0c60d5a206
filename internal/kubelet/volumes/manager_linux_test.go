package volumes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	k8stypes "k8s.io/apimachinery/pkg/types"
)

func TestNew(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc    string
		opts    Options
		wantErr bool
	}{
		{desc: "ok", opts: Options{PodsDir: "/var/lib/kubelet/pods"}},
		{desc: "missing PodsDir", opts: Options{}, wantErr: true},
		{desc: "relative PodsDir", opts: Options{PodsDir: "pods"}, wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			_, err := New(tc.opts)
			if (err != nil) != tc.wantErr {
				t.Fatalf("New = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
}

func TestNewDoesNoIO(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "pods")
	if _, err := New(Options{PodsDir: dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("New created %s (err %v)", dir, err)
	}
}

func TestMountVolumesEmptyDirDisk(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	ctx := context.Background()
	pod := newPod("uid-disk",
		v1.Volume{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "nosource"},
	)
	infos, err := m.MountVolumes(ctx, pod)
	if err != nil {
		t.Fatalf("MountVolumes: %v", err)
	}
	for _, name := range []string{"cache", "nosource"} {
		want := filepath.Join(m.podsDir, "uid-disk", "volumes", "kubernetes.io~empty-dir", name)
		if got := infos[name]; got != (VolumeInfo{HostPath: want, Managed: true}) {
			t.Errorf("%s: info %+v, want HostPath %s managed", name, got, want)
		}
		fi, err := os.Stat(want)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.IsDir() || fi.Mode().Perm() != 0o777 {
			t.Errorf("%s: mode %v, want a 0777 directory", name, fi.Mode())
		}
		if fs := mustFSType(t, want); fs != "" {
			t.Errorf("%s: disk emptyDir is a %s mount", name, fs)
		}
	}

	// Idempotent: data survives a second sync.
	data := filepath.Join(infos["cache"].HostPath, "data")
	if err := os.WriteFile(data, []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := m.MountVolumes(ctx, pod); err != nil {
		t.Fatalf("second MountVolumes: %v", err)
	}
	if got, err := os.ReadFile(data); err != nil || string(got) != "kept" {
		t.Fatalf("data after resync: %q, %v", got, err)
	}

	if err := m.UnmountVolumes(ctx, pod.UID); err != nil {
		t.Fatalf("UnmountVolumes: %v", err)
	}
	if _, err := os.Stat(m.volumesDir(pod.UID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("volumes dir still there: %v", err)
	}
	if _, err := os.Stat(m.podDir(pod.UID)); err != nil {
		t.Fatalf("pod dir should stay for CleanupOrphans: %v", err)
	}
	// Unmounting again (or a pod that never had volumes) is fine.
	if err := m.UnmountVolumes(ctx, pod.UID); err != nil {
		t.Fatalf("second UnmountVolumes: %v", err)
	}
	if err := m.UnmountVolumes(ctx, "never-seen"); err != nil {
		t.Fatalf("UnmountVolumes of unknown pod: %v", err)
	}
}

func TestMountVolumesEmptyDirMemory(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	ctx := context.Background()
	limit := resource.MustParse("1Mi")
	pod := newPod("uid-mem",
		v1.Volume{Name: "shm", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: &limit}}},
	)
	infos, err := m.MountVolumes(ctx, pod)
	if err != nil {
		t.Fatalf("MountVolumes: %v", err)
	}
	dir := infos["shm"].HostPath
	if fs := mustFSType(t, dir); fs != "tmpfs" {
		t.Fatalf("%s: fs %q, want tmpfs", dir, fs)
	}
	if opts := mountSuperOptions(t, dir); !strings.Contains(opts, "size=1024k") {
		t.Errorf("tmpfs options %q, want size=1024k", opts)
	}
	// The size limit is enforced by the kernel.
	err = os.WriteFile(filepath.Join(dir, "big"), make([]byte, 2<<20), 0o600)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("writing 2Mi into a 1Mi tmpfs: %v, want ENOSPC", err)
	}
	if err := os.Remove(filepath.Join(dir, "big")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "small"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A resync keeps the same tmpfs (no stacked mount, data kept).
	if _, err := m.MountVolumes(ctx, pod); err != nil {
		t.Fatalf("second MountVolumes: %v", err)
	}
	if mps := mustMountPoints(t, dir); len(mps) != 1 {
		t.Errorf("mounts at %s after resync: %v, want one", dir, mps)
	}
	if _, err := os.Stat(filepath.Join(dir, "small")); err != nil {
		t.Errorf("data lost on resync: %v", err)
	}

	if err := m.UnmountVolumes(ctx, pod.UID); err != nil {
		t.Fatalf("UnmountVolumes: %v", err)
	}
	if mps := mustMountPoints(t, m.podsDir); len(mps) != 0 {
		t.Fatalf("still mounted: %v", mps)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s still exists: %v", dir, err)
	}
}

func TestMemoryVolumeSize(t *testing.T) {
	t.Parallel()
	m := newTestManager(t) // allocatable memory 8Gi
	withLimits := func(limits ...string) *v1.Pod {
		pod := newPod("uid")
		pod.Spec.Containers = nil
		for _, l := range limits {
			c := v1.Container{Name: "c" + l}
			if l != "" {
				c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse(l)}
			}
			pod.Spec.Containers = append(pod.Spec.Containers, c)
		}
		return pod
	}
	gi := int64(1 << 30)
	for _, tc := range []struct {
		desc      string
		pod       *v1.Pod
		sizeLimit int64
		want      int64
	}{
		{desc: "no limits: allocatable", pod: withLimits(""), want: 8 * gi},
		{desc: "pod limit", pod: withLimits("1Gi", "2Gi"), want: 3 * gi},
		{desc: "one container unlimited", pod: withLimits("1Gi", ""), want: 8 * gi},
		{desc: "sizeLimit below pod limit", pod: withLimits("1Gi"), sizeLimit: 64 << 20, want: 64 << 20},
		{desc: "sizeLimit above pod limit ignored", pod: withLimits("1Gi"), sizeLimit: 4 * gi, want: gi},
		{desc: "sizeLimit above allocatable ignored", pod: withLimits(""), sizeLimit: 16 * gi, want: 8 * gi},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := m.memoryVolumeSize(tc.pod, tc.sizeLimit); got != tc.want {
				t.Errorf("size %d, want %d", got, tc.want)
			}
		})
	}
}

func TestMountVolumesEmptyDirFSGroup(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	gid := int64(4321)
	pod := newPod("uid-fsgroup", v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &gid}
	infos, err := m.MountVolumes(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(infos["data"].HostPath)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Gid != uint32(gid) {
		t.Errorf("gid %d, want %d", st.Gid, gid)
	}
	if fi.Mode()&os.ModeSetgid == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("mode %v, want setgid and 0777", fi.Mode())
	}
}

func TestMountVolumesUnsupported(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	pod := newPod("uid-unsupported",
		v1.Volume{Name: "ok", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
		v1.Volume{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}},
		v1.Volume{Name: "proj", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}},
		v1.Volume{Name: "claim", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}},
		v1.Volume{Name: "share", VolumeSource: v1.VolumeSource{ISCSI: &v1.ISCSIVolumeSource{TargetPortal: "p", IQN: "iqn.2001-04.com.example:t"}}},
		v1.Volume{Name: "Bad_Name", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "huge", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumHugePages}}},
	)
	infos, err := m.MountVolumes(context.Background(), pod)
	if err == nil {
		t.Fatal("MountVolumes succeeded")
	}
	if _, ok := infos["ok"]; !ok || len(infos) != 1 {
		t.Errorf("infos %v, want only the supported volume", infos)
	}
	if !errors.Is(err, ErrUnsupportedVolume) {
		t.Errorf("errors.Is(err, ErrUnsupportedVolume) = false for %v", err)
	}
	msg := err.Error()
	for _, want := range []string{
		`volume "cm": configMap volumes need an API server (not available in standalone mode)`,
		`volume "sec": secret volumes need an API server (not available in standalone mode)`,
		`volume "proj": projected volumes need an API server (not available in standalone mode)`,
		`volume "claim": persistentVolumeClaim volumes need an API server (not available in standalone mode)`,
		`volume "share": iscsi volumes are not supported by this kubelet`,
		`volume "Bad_Name": invalid volume name`,
		`volume "huge": emptyDir medium "HugePages" is not supported`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	var uve *UnsupportedVolumeError
	if !errors.As(err, &uve) || uve.Volume != "cm" || !uve.NeedsAPIServer() {
		t.Errorf("errors.As: %+v", uve)
	}
	if err := m.UnmountVolumes(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
}

func TestMountVolumesBadPod(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	for _, uid := range []string{"", "../escape", ".hidden"} {
		if _, err := m.MountVolumes(context.Background(), newPod(uid)); err == nil {
			t.Errorf("uid %q accepted", uid)
		}
	}
	for _, uid := range []k8stypes.UID{"", "..", "a/b"} {
		if err := m.UnmountVolumes(context.Background(), uid); err == nil {
			t.Errorf("UnmountVolumes(%q) accepted", uid)
		}
	}
}

func TestMountVolumesCancelled(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pod := newPod("uid-cancel", v1.Volume{Name: "a", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	if _, err := m.MountVolumes(ctx, pod); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestCleanupOrphans(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	ctx := context.Background()
	mem := v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}
	disk := v1.Volume{Name: "disk", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}
	dapi := v1.Volume{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
		Items: []v1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
	}}}
	active, orphan := newPod("uid-active", mem, disk), newPod("uid-orphan", mem, disk, dapi)
	for _, p := range []*v1.Pod{active, orphan} {
		if _, err := m.MountVolumes(ctx, p); err != nil {
			t.Fatalf("MountVolumes %s: %v", p.UID, err)
		}
		// Files the kubelet keeps in the pod dir besides volumes.
		if err := os.WriteFile(filepath.Join(m.podDir(p.UID), "etc-hosts"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A stray file in the pods dir is not a pod.
	if err := os.WriteFile(filepath.Join(m.podsDir, "stray"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	if err := m.CleanupOrphans(ctx, map[k8stypes.UID]bool{active.UID: true}); err != nil {
		t.Fatalf("CleanupOrphans: %v", err)
	}
	if _, err := os.Stat(m.podDir(orphan.UID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("orphan dir still there: %v", err)
	}
	if mps := mustMountPoints(t, m.podDir(active.UID)); len(mps) != 1 {
		t.Errorf("active pod mounts %v, want its one tmpfs", mps)
	}
	if _, err := os.Stat(filepath.Join(m.podDir(active.UID), "etc-hosts")); err != nil {
		t.Errorf("active pod files touched: %v", err)
	}
	if _, err := os.Stat(filepath.Join(m.podsDir, "stray")); err != nil {
		t.Errorf("stray file removed: %v", err)
	}

	// Everything goes once nothing is active.
	if err := m.CleanupOrphans(ctx, nil); err != nil {
		t.Fatalf("CleanupOrphans(nil): %v", err)
	}
	if mps := mustMountPoints(t, m.podsDir); len(mps) != 0 {
		t.Errorf("still mounted: %v", mps)
	}
	if _, err := os.Stat(m.podDir(active.UID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pod dir still there: %v", err)
	}
}

func TestCleanupOrphansNoPodsDir(t *testing.T) {
	t.Parallel()
	m, err := New(Options{PodsDir: filepath.Join(t.TempDir(), "absent")})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CleanupOrphans(context.Background(), nil); err != nil {
		t.Fatalf("CleanupOrphans: %v", err)
	}
}

// A mount the manager cannot remove (here: a read-only bind of a dir holding a file we
// must not lose) is never deleted through.
func TestRemoveTreeNeverDeletesThroughMounts(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	ctx := context.Background()
	pod := newPod("uid-bind", v1.Volume{Name: "d", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	infos, err := m.MountVolumes(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	precious := t.TempDir()
	if err := os.WriteFile(filepath.Join(precious, "keep"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(infos["d"].HostPath, "bind")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(precious, target, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	// removeTree unmounts the bind first, so the file behind it survives.
	if err := m.UnmountVolumes(ctx, pod.UID); err != nil {
		t.Fatalf("UnmountVolumes: %v", err)
	}
	if _, err := os.Stat(filepath.Join(precious, "keep")); err != nil {
		t.Fatalf("file behind a mount was deleted: %v", err)
	}
}
