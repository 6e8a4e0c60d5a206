package volumes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
)

// lookups are the two resolvers: the kernel's openat2 (the path this machine
// takes) and the openat walk kept for kernels without it.
var lookups = []struct {
	name   string
	lookup lookupFunc
}{
	{name: "openat2", lookup: openat2Beneath},
	{name: "openat-walk", lookup: walkBeneath},
}

// subPathFixture is a volume next to a directory outside it (siblings, so
// "../<outside>" leaves the volume), and a pod directory of a test Manager.
type subPathFixture struct {
	m       *Manager
	uid     k8stypes.UID
	vol     string
	outside string
}

// newSubPathFixture lays out
//
//	vol/real/marker     "inside"
//	vol/real/f          "file"
//	vol/link     -> real
//	vol/d/up     -> ../real
//	vol/flink    -> real/f
//	outside/marker      "HOST"
func newSubPathFixture(t *testing.T) *subPathFixture {
	t.Helper()
	parent := t.TempDir()
	f := &subPathFixture{m: newTestManager(t), uid: "uid-sub",
		vol: filepath.Join(parent, "vol"), outside: filepath.Join(parent, "outside")}
	for _, d := range []string{f.vol, f.outside, filepath.Join(f.vol, "real"), filepath.Join(f.vol, "d")} {
		mustMkdir(t, d)
	}
	mustWrite(t, filepath.Join(f.vol, "real", "marker"), "inside")
	mustWrite(t, filepath.Join(f.vol, "real", "f"), "file")
	mustWrite(t, filepath.Join(f.outside, "marker"), "HOST")
	for link, target := range map[string]string{"link": "real", "d/up": "../real", "flink": "real/f"} {
		mustSymlink(t, target, filepath.Join(f.vol, link))
	}
	t.Cleanup(func() {
		if err := f.m.UnmountVolumes(context.Background(), f.uid); err != nil {
			t.Errorf("UnmountVolumes: %v", err)
		}
	})
	return f
}

func (f *subPathFixture) subPath(path string, idx int) SubPath {
	return SubPath{VolumePath: f.vol, Path: path, PodDir: f.m.podDir(f.uid), VolumeName: "data", ContainerName: "app", MountIndex: idx}
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// mountCount counts the mountinfo entries exactly at path.
func mountCount(t *testing.T, path string) int {
	t.Helper()
	entries, err := readMountInfo()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.MountPoint == path {
			n++
		}
	}
	return n
}

// (a) Links that stay inside the volume are followed; missing directories are
// created inside it; the returned path is the bind mount of what was opened.
func TestBindSubPathInsideVolume(t *testing.T) {
	t.Parallel()
	for _, l := range lookups {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			f := newSubPathFixture(t)
			for i, tc := range []struct {
				sub, want, content string // want: the host path the mount must show
			}{
				{sub: "real", want: "real"},
				{sub: "link/new/deeper", want: "real/new/deeper"},
				{sub: "d/up", want: "real"},
				{sub: "d/up/f", want: "real/f", content: "file"},
				{sub: "flink", want: "real/f", content: "file"},
				{sub: "./real//f", want: "real/f", content: "file"},
				{sub: ".", want: "."},
			} {
				sp := f.subPath(tc.sub, i)
				got, err := bindSubPath(sp, l.lookup)
				if err != nil {
					t.Fatalf("%s: %v", tc.sub, err)
				}
				if want := filepath.Join(f.m.podDir(f.uid), "volume-subpaths", "data", "app", strconv.Itoa(i)); got != want {
					t.Errorf("%s: path %s, want %s", tc.sub, got, want)
				}
				if mountCount(t, got) != 1 {
					t.Errorf("%s: %s is not mounted once", tc.sub, got)
				}
				mounted, err1 := os.Stat(got)
				want, err2 := os.Stat(filepath.Join(f.vol, tc.want))
				if err1 != nil || err2 != nil || !os.SameFile(mounted, want) {
					t.Errorf("%s: mount shows %v (%v), want %s (%v)", tc.sub, mounted, err1, tc.want, err2)
				}
				if tc.content != "" {
					if b, err := os.ReadFile(got); err != nil || string(b) != tc.content {
						t.Errorf("%s: read %q, %v; want %q", tc.sub, b, err, tc.content)
					}
				}
			}
		})
	}
}

// (b) Links leaving the volume (absolute, or climbing with "..") are refused
// before anything is created or mounted; absolute links are refused even when
// they point back inside (RESOLVE_BENEATH), as are magic links.
func TestBindSubPathEscapes(t *testing.T) {
	t.Parallel()
	for _, l := range lookups {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			f := newSubPathFixture(t)
			links := map[string]string{
				"abs":       f.outside,
				"root":      "/",
				"rel":       "../outside",
				"d/rel":     "../../outside/new",
				"absinside": filepath.Join(f.vol, "real"),
				"magic":     "/proc/self/root",
			}
			for link, target := range links {
				mustSymlink(t, target, filepath.Join(f.vol, link))
			}
			for i, sub := range []string{"abs", "abs/marker", "abs/new/dir", "root", "root/etc", "rel",
				"rel/new", "d/rel", "d/rel/x", "absinside", "magic", "magic/etc"} {
				sp := f.subPath(sub, i)
				got, err := bindSubPath(sp, l.lookup)
				if !errors.Is(err, ErrSubPathEscapes) {
					t.Errorf("%s: (%q, %v), want ErrSubPathEscapes", sub, got, err)
				}
				if err != nil && !strings.Contains(err.Error(), sub) {
					t.Errorf("%s: error %q does not name the subPath", sub, err)
				}
				if _, err := os.Lstat(sp.target()); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s: mount point created (%v)", sub, err)
				}
			}
			entries, _ := os.ReadDir(f.outside)
			if len(entries) != 1 {
				t.Errorf("outside the volume now holds %v", entries)
			}
			if _, err := os.Lstat(filepath.Join(f.m.podDir(f.uid), subPathsDirName)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("volume-subpaths created: %v", err)
			}
		})
	}
}

func TestBindSubPathErrors(t *testing.T) {
	t.Parallel()
	f := newSubPathFixture(t)
	mustSymlink(t, "missing", filepath.Join(f.vol, "dangling"))
	mustSymlink(t, "loop", filepath.Join(f.vol, "loop"))
	for _, tc := range []struct {
		desc string
		sp   SubPath
		is   error
	}{
		{desc: "dangling link", sp: f.subPath("dangling", 0), is: os.ErrNotExist},
		{desc: "link loop", sp: f.subPath("loop", 1), is: unix.ELOOP},
		{desc: "through a file", sp: f.subPath("real/f/x", 2), is: unix.ENOTDIR},
		{desc: "dot-dot", sp: f.subPath("real/../..", 3)},
		{desc: "absolute", sp: f.subPath("/etc", 4)},
		{desc: "bad container name", sp: SubPath{VolumePath: f.vol, Path: "real", PodDir: f.m.podDir(f.uid), VolumeName: "data", ContainerName: "../x"}},
		{desc: "bad volume name", sp: SubPath{VolumePath: f.vol, Path: "real", PodDir: f.m.podDir(f.uid), VolumeName: "a/b", ContainerName: "app"}},
		{desc: "relative volume path", sp: SubPath{VolumePath: "vol", Path: "real", PodDir: f.m.podDir(f.uid), VolumeName: "data", ContainerName: "app"}},
		{desc: "missing volume", sp: SubPath{VolumePath: filepath.Join(f.vol, "nope"), Path: "real", PodDir: f.m.podDir(f.uid), VolumeName: "data", ContainerName: "app"}, is: os.ErrNotExist},
	} {
		for _, l := range lookups {
			_, err := bindSubPath(tc.sp, l.lookup)
			if err == nil || errors.Is(err, ErrSubPathEscapes) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Errorf("%s (%s): %v, want an error like %v", tc.desc, l.name, err, tc.is)
			}
		}
	}
	if _, err := os.Lstat(filepath.Join(f.vol, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("created through a dangling link: %v", err)
	}
}

// Created directories get the volume root's mode, not the umask's.
func TestBindSubPathCreatedMode(t *testing.T) {
	t.Parallel()
	f := newSubPathFixture(t)
	if err := os.Chmod(f.vol, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if _, err := BindSubPath(f.subPath("a/b", 0)); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a", "a/b"} {
		fi, err := os.Stat(filepath.Join(f.vol, d))
		if err != nil || !fi.IsDir() || fi.Mode()&(os.ModePerm|os.ModeSticky) != 0o777|os.ModeSticky {
			t.Errorf("%s: %v %v, want a directory with mode 1777", d, fi.Mode(), err)
		}
	}
}

// A restarted container reuses the mount of the same file; a subPath that now
// names another file gets a fresh mount instead of the stale one.
func TestBindSubPathReuse(t *testing.T) {
	t.Parallel()
	f := newSubPathFixture(t)
	sp := f.subPath("real/f", 0)
	for i := 0; i < 2; i++ {
		got, err := BindSubPath(sp)
		if err != nil {
			t.Fatal(err)
		}
		if n := mountCount(t, got); n != 1 {
			t.Fatalf("bind %d: %d mounts at %s, want 1", i, n, got)
		}
	}
	mustWrite(t, filepath.Join(f.vol, "real", "f.new"), "new")
	if err := os.Rename(filepath.Join(f.vol, "real", "f.new"), filepath.Join(f.vol, "real", "f")); err != nil {
		t.Fatal(err)
	}
	got, err := BindSubPath(sp)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(got); err != nil || string(b) != "new" || mountCount(t, got) != 1 {
		t.Errorf("after the file was replaced: %q, %v, %d mounts", b, err, mountCount(t, got))
	}
	// The subPath turned into a directory: the file mount point is replaced.
	if err := os.Remove(filepath.Join(f.vol, "real", "f")); err != nil {
		t.Fatal(err)
	}
	mustMkdir(t, filepath.Join(f.vol, "real", "f"))
	got, err = BindSubPath(sp)
	if fi, serr := os.Stat(got); err != nil || serr != nil || !fi.IsDir() || mountCount(t, got) != 1 {
		t.Errorf("after the file became a directory: %v, %v, %d mounts", err, serr, mountCount(t, got))
	}
}

// (d) Tearing down the pod's volumes unmounts its subPath mounts and removes
// volume-subpaths; orphan cleanup does the same before it removes the pod
// directory. Nothing behind a mount is deleted.
func TestCleanSubPaths(t *testing.T) {
	t.Parallel()
	for _, viaOrphans := range []bool{false, true} {
		f := newSubPathFixture(t)
		ctx := context.Background()
		pod := newPod(string(f.uid), v1.Volume{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
		infos, err := f.m.MountVolumes(ctx, pod)
		if err != nil {
			t.Fatal(err)
		}
		sps := []SubPath{f.subPath("real", 0), f.subPath("real/f", 1), f.subPath("link", 0)}
		sps[2].ContainerName = "sidecar"
		cache := sps[0]
		cache.VolumePath, cache.VolumeName, cache.Path = infos["cache"].HostPath, "cache", "logs"
		for _, sp := range append(sps, cache) {
			if _, err := BindSubPath(sp); err != nil {
				t.Fatal(err)
			}
		}
		podDir := f.m.podDir(f.uid)
		if n := len(mustMountPoints(t, filepath.Join(podDir, subPathsDirName))); n != 4 {
			t.Fatalf("%d subPath mounts, want 4", n)
		}
		if viaOrphans {
			err = f.m.CleanupOrphans(ctx, nil)
		} else {
			err = f.m.UnmountVolumes(ctx, f.uid)
		}
		if err != nil {
			t.Fatalf("cleanup (orphans %v): %v", viaOrphans, err)
		}
		if mps := mustMountPoints(t, f.m.podsDir); len(mps) != 0 {
			t.Errorf("still mounted: %v", mps)
		}
		if _, err := os.Lstat(filepath.Join(podDir, subPathsDirName)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("volume-subpaths left (orphans %v): %v", viaOrphans, err)
		}
		if _, err := os.Lstat(podDir); viaOrphans != errors.Is(err, os.ErrNotExist) {
			t.Errorf("pod dir (orphans %v): %v", viaOrphans, err)
		}
		for _, p := range []string{"real/marker", "real/f"} {
			if _, err := os.Stat(filepath.Join(f.vol, p)); err != nil {
				t.Errorf("volume file %s lost: %v", p, err)
			}
		}
	}
}
