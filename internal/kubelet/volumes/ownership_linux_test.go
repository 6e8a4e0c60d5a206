package volumes

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ownershipTestGroup is the fsGroup of these tests: neither root's group nor
// one the temp files start with.
const ownershipTestGroup = 4242

// outsideFiles is what a volume's symbolic links point at: a directory
// outside the volume holding a file that stands for /etc/shadow (0600,
// root:root), and a second file of that kind directly.
type outsideFiles struct {
	dir, dirFile, file string
}

func newOutsideFiles(t *testing.T) outsideFiles {
	t.Helper()
	dir := t.TempDir()
	o := outsideFiles{dir: filepath.Join(dir, "etc"), file: filepath.Join(dir, "shadow")}
	o.dirFile = filepath.Join(o.dir, "shadow")
	if err := os.Mkdir(o.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{o.file, o.dirFile} {
		if err := os.WriteFile(p, []byte("root:secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for p, mode := range map[string]os.FileMode{o.dir: 0o700, o.file: 0o600, o.dirFile: 0o600} {
		if err := os.Chown(p, 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // whatever the umask
			t.Fatal(err)
		}
	}
	return o
}

// checkUntouched fails the test when the fsGroup change reached outside the volume.
func (o outsideFiles) checkUntouched(t *testing.T) {
	t.Helper()
	for p, want := range map[string]os.FileMode{o.dir: os.ModeDir | 0o700, o.dirFile: 0o600, o.file: 0o600} {
		mode, uid, gid := lstatOwner(t, p)
		if mode != want || uid != 0 || gid != 0 {
			t.Errorf("outside the volume %s: mode %v owner %d:%d, want %v 0:0", p, mode, uid, gid, want)
		}
	}
}

func lstatOwner(t *testing.T, path string) (mode os.FileMode, uid, gid uint32) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fi.Mode(), st.Uid, st.Gid
}

// The walk gives the volume's entries the fsGroup and its permission bits,
// changes the group of symbolic links themselves, and changes nothing a link
// points at outside the volume (a file, a directory) or inside it (beyond
// what the walk does to that entry anyway).
func TestVolumeOwnershipStaysInVolume(t *testing.T) {
	t.Parallel()
	out := newOutsideFiles(t)
	vol := t.TempDir()
	mustMkdir(t, filepath.Join(vol, "sub", "deeper"))
	mustWrite(t, filepath.Join(vol, "sub", "data"), "x")
	if err := os.Chmod(filepath.Join(vol, "sub", "data"), 0o604); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(vol, "sub", "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, out.file, filepath.Join(vol, "shadow"))
	mustSymlink(t, out.dir, filepath.Join(vol, "etc"))
	mustSymlink(t, "sub/data", filepath.Join(vol, "data"))
	gid := int64(ownershipTestGroup)

	done := make(chan error, 1)
	go func() { done <- setVolumeOwnership(vol, &gid, false) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("setVolumeOwnership: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("setVolumeOwnership blocked (a FIFO opened for reading?)")
	}

	out.checkUntouched(t)
	for rel, want := range map[string]os.FileMode{
		".":          os.ModeDir | os.ModeSetgid | 0o770,
		"sub":        os.ModeDir | os.ModeSetgid | 0o770,
		"sub/deeper": os.ModeDir | os.ModeSetgid | 0o770,
		"sub/data":   0o660,
		"sub/pipe":   os.ModeNamedPipe | 0o660,
		"shadow":     os.ModeSymlink,
		"etc":        os.ModeSymlink,
		"data":       os.ModeSymlink,
	} {
		mode, _, g := lstatOwner(t, filepath.Join(vol, rel))
		if g != ownershipTestGroup {
			t.Errorf("%s: group %d, want %d", rel, g, ownershipTestGroup)
		}
		if mode&os.ModeType != want&os.ModeType || mode&os.ModeSetgid != want&os.ModeSetgid {
			t.Errorf("%s: mode %v, want %v", rel, mode, want)
		}
		if mode.Perm()&want.Perm() != want.Perm() {
			t.Errorf("%s: mode %v lacks the group bits of %v", rel, mode, want)
		}
	}
	if mode, _, _ := lstatOwner(t, filepath.Join(vol, "sub", "data")); mode.Perm() != 0o664 {
		t.Errorf("sub/data: mode %v, want its own 0604 plus group rw", mode)
	}
}

// A directory the walk has listed but not reached yet is replaced by a
// symbolic link to a directory outside the volume (what another pod sharing
// the claim can do while the kubelet applies this pod's fsGroup): the walk
// changes the link's group and neither the outside directory nor the file in
// it. The swap is made while the walk is held at its open of the directory
// listed before it (a fanotify permission event), so the interleaving is the
// same on every run.
func TestVolumeOwnershipDirectorySwappedForSymlink(t *testing.T) {
	out := newOutsideFiles(t)
	vol := t.TempDir()
	mustMkdir(t, filepath.Join(vol, "a"))
	mustMkdir(t, filepath.Join(vol, "b"))
	mustWrite(t, filepath.Join(vol, "b", "f"), "x")
	b := filepath.Join(vol, "b")
	swapped := holdOpen(t, filepath.Join(vol, "a"), func() error {
		if err := os.RemoveAll(b); err != nil {
			return err
		}
		return os.Symlink(out.dir, b)
	})
	gid := int64(ownershipTestGroup)

	done := make(chan error, 1)
	go func() { done <- setVolumeOwnership(vol, &gid, false) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("setVolumeOwnership did not return")
	}
	if !swapped() {
		t.Fatalf("the walk never opened %s/a for reading (err %v)", vol, err)
	}
	out.checkUntouched(t)
	if err != nil {
		t.Logf("setVolumeOwnership: %v (allowed: the tree changed under it)", err)
	}
	if mode, _, g := lstatOwner(t, b); mode&os.ModeSymlink == 0 || (err == nil && g != ownershipTestGroup) {
		t.Errorf("the swapped-in link: mode %v group %d, want a link of group %d", mode, g, ownershipTestGroup)
	}
}

// holdOpen holds every open of path (a directory) with a fanotify permission
// event until the test answers: while the first one is held it runs swap.
// The returned func reports whether swap ran; the marks go when the test ends.
func holdOpen(t *testing.T, path string, swap func() error) (swapped func() bool) {
	t.Helper()
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_CONTENT|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK, unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil {
		t.Fatalf("fanotify (needs CAP_SYS_ADMIN): %v", err)
	}
	if err := unix.FanotifyMark(fd, unix.FAN_MARK_ADD, unix.FAN_OPEN_PERM|unix.FAN_ONDIR, unix.AT_FDCWD, path); err != nil {
		unix.Close(fd)
		t.Fatalf("fanotify mark %s: %v", path, err)
	}
	var (
		mu  sync.Mutex
		ran bool
		wg  sync.WaitGroup
	)
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 4096)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 50); err != nil && !errors.Is(err, unix.EINTR) {
				t.Errorf("poll fanotify: %v", err)
				return
			}
			n, err := unix.Read(fd, buf)
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				t.Errorf("read fanotify: %v", err)
				return
			}
			for off := 0; off+24 <= n; {
				evLen := int(binary.NativeEndian.Uint32(buf[off:]))
				evFd := int32(binary.NativeEndian.Uint32(buf[off+16:]))
				mu.Lock()
				if !ran {
					ran = true
					if err := swap(); err != nil {
						t.Errorf("swap while %s is held: %v", path, err)
					}
				}
				mu.Unlock()
				resp := make([]byte, 8)
				binary.NativeEndian.PutUint32(resp, uint32(evFd))
				binary.NativeEndian.PutUint32(resp[4:], unix.FAN_ALLOW)
				if _, err := unix.Write(fd, resp); err != nil {
					t.Errorf("answer fanotify: %v", err)
				}
				if evFd >= 0 {
					unix.Close(int(evFd))
				}
				if evLen <= 0 {
					break
				}
				off += evLen
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
		unix.Close(fd)
	})
	return func() bool {
		mu.Lock()
		defer mu.Unlock()
		return ran
	}
}
