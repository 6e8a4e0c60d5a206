package volumes

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// hostPathFixture creates one file of every type in a temp dir.
type hostPathFixture struct {
	dir, file, socket, charDev, blockDev, dirLink, missing string
}

func newHostPathFixture(t *testing.T) hostPathFixture {
	t.Helper()
	root := t.TempDir()
	f := hostPathFixture{
		dir:      filepath.Join(root, "dir"),
		file:     filepath.Join(root, "file"),
		socket:   filepath.Join(root, "sock"),
		charDev:  filepath.Join(root, "null"),
		blockDev: filepath.Join(root, "loop"),
		dirLink:  filepath.Join(root, "dirlink"),
		missing:  filepath.Join(root, "missing"),
	}
	if err := os.Mkdir(f.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", f.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if err := unix.Mknod(f.charDev, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatalf("mknod char device: %v", err)
	}
	if err := unix.Mknod(f.blockDev, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0))); err != nil {
		t.Fatalf("mknod block device: %v", err)
	}
	if err := os.Symlink(f.dir, f.dirLink); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestCheckHostPathType(t *testing.T) {
	t.Parallel()
	f := newHostPathFixture(t)
	for _, tc := range []struct {
		desc    string
		path    string
		typ     v1.HostPathType
		wantErr string // substring; "" = success
	}{
		{desc: "unset type checks nothing", path: f.missing, typ: v1.HostPathUnset},
		{desc: "Directory", path: f.dir, typ: v1.HostPathDirectory},
		{desc: "Directory through a symlink", path: f.dirLink, typ: v1.HostPathDirectory},
		{desc: "Directory on a file", path: f.file, typ: v1.HostPathDirectory, wantErr: "hostPath type check failed: " + f.file + " is not a directory, it's a File"},
		{desc: "Directory missing", path: f.missing, typ: v1.HostPathDirectory, wantErr: "hostPath " + f.missing + " doesn't exist"},
		{desc: "DirectoryOrCreate on a file", path: f.file, typ: v1.HostPathDirectoryOrCreate, wantErr: "is not a directory"},
		{desc: "File", path: f.file, typ: v1.HostPathFile},
		{desc: "File on a directory", path: f.dir, typ: v1.HostPathFile, wantErr: "hostPath type check failed: " + f.dir + " is not a file, it's a Directory"},
		{desc: "File missing", path: f.missing, typ: v1.HostPathFile, wantErr: "doesn't exist"},
		{desc: "FileOrCreate on a directory", path: f.dir, typ: v1.HostPathFileOrCreate, wantErr: "is not a file"},
		{desc: "FileOrCreate without parent", path: filepath.Join(f.missing, "f"), typ: v1.HostPathFileOrCreate, wantErr: "hostPath create file"},
		{desc: "Socket", path: f.socket, typ: v1.HostPathSocket},
		{desc: "Socket on a file", path: f.file, typ: v1.HostPathSocket, wantErr: "is not a socket file, it's a File"},
		{desc: "CharDevice", path: f.charDev, typ: v1.HostPathCharDev},
		{desc: "CharDevice on a block device", path: f.blockDev, typ: v1.HostPathCharDev, wantErr: "is not a character device, it's a BlockDevice"},
		{desc: "BlockDevice", path: f.blockDev, typ: v1.HostPathBlockDev},
		{desc: "BlockDevice on a char device", path: f.charDev, typ: v1.HostPathBlockDev, wantErr: "is not a block device, it's a CharDevice"},
		{desc: "BlockDevice missing", path: f.missing, typ: v1.HostPathBlockDev, wantErr: "doesn't exist"},
		{desc: "invalid type", path: f.dir, typ: "Pipe", wantErr: "Pipe is an invalid volume type"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			err := checkHostPathType(tc.path, tc.typ)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestCheckHostPathTypeCreates(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	old := processUmask(t)

	dir := filepath.Join(root, "a", "b", "c")
	if err := checkHostPathType(dir, v1.HostPathDirectoryOrCreate); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != os.FileMode(0o755&^old) {
		t.Fatalf("created dir: %v %v", fi.Mode(), err)
	}
	// Existing directory is fine again.
	if err := checkHostPathType(dir, v1.HostPathDirectoryOrCreate); err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(root, "a", "f")
	if err := checkHostPathType(file, v1.HostPathFileOrCreate); err != nil {
		t.Fatal(err)
	}
	fi, err = os.Stat(file)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 || fi.Mode().Perm() != os.FileMode(0o644&^old) {
		t.Fatalf("created file: %v size %d %v", fi.Mode(), fi.Size(), err)
	}
	// An existing file's content is kept.
	if err := os.WriteFile(file, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkHostPathType(file, v1.HostPathFileOrCreate); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); string(b) != "data" {
		t.Fatalf("content %q", b)
	}
}

func TestMountVolumesHostPath(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	f := newHostPathFixture(t)
	typ := func(t v1.HostPathType) *v1.HostPathType { return &t }
	for _, tc := range []struct {
		desc    string
		src     v1.HostPathVolumeSource
		wantErr string
	}{
		{desc: "unset type", src: v1.HostPathVolumeSource{Path: f.missing}},
		{desc: "Directory", src: v1.HostPathVolumeSource{Path: f.dir, Type: typ(v1.HostPathDirectory)}},
		{desc: "wrong type", src: v1.HostPathVolumeSource{Path: f.file, Type: typ(v1.HostPathSocket)}, wantErr: `volume "hp": hostPath type check failed`},
		{desc: "backsteps", src: v1.HostPathVolumeSource{Path: f.dir + "/../dir"}, wantErr: "must not contain '..'"},
		{desc: "relative", src: v1.HostPathVolumeSource{Path: "var/log"}, wantErr: "must be an absolute path"},
		{desc: "empty", src: v1.HostPathVolumeSource{}, wantErr: "path is empty"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			src := tc.src
			pod := newPod("uid-hp-"+strings.ReplaceAll(tc.desc, " ", "-"), v1.Volume{Name: "hp", VolumeSource: v1.VolumeSource{HostPath: &src}})
			infos, err := m.MountVolumes(context.Background(), pod)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := infos["hp"]; got != (VolumeInfo{HostPath: tc.src.Path}) {
				t.Fatalf("info %+v", got)
			}
			// Tearing down never touches the host path.
			if err := m.UnmountVolumes(context.Background(), pod.UID); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(f.dir); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// processUmask reads the umask from /proc/self/status: setting it to read it
// would widen, for a moment, the files that parallel tests create.
func processUmask(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			if err != nil {
				t.Fatal(err)
			}
			return int(m)
		}
	}
	t.Fatal("no Umask in /proc/self/status")
	return 0
}
