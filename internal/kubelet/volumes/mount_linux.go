package volumes

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubelet-dockershim/kubelet/internal/logging"
	"github.com/kubelet-dockershim/kubelet/internal/procfs"
)

const mountInfoPath = "/proc/self/mountinfo"

// mountTmpfs mounts a tmpfs on dir, limited to sizeBytes when > 0 (else the kernel
// default, half of RAM).
func mountTmpfs(dir string, sizeBytes int64) error {
	data := ""
	if sizeBytes > 0 {
		data = "size=" + strconv.FormatInt(sizeBytes, 10)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, data); err != nil {
		return fmt.Errorf("mount tmpfs on %s (%s): %w", dir, data, err)
	}
	return nil
}

// bindFlags are the mount options a bind mount can take (on a remount).
var bindFlags = map[string]uintptr{
	"ro": unix.MS_RDONLY, "nosuid": unix.MS_NOSUID, "nodev": unix.MS_NODEV, "noexec": unix.MS_NOEXEC,
	"noatime": unix.MS_NOATIME, "nodiratime": unix.MS_NODIRATIME, "relatime": unix.MS_RELATIME,
}

// bindMount bind-mounts src on dir (not recursively, as upstream's local
// volumes) with the options a bind mount can take (read-only when asked,
// and those of bindFlags: a bind mount takes them only on a remount); it
// returns the options it could not apply.
func bindMount(src, dir string, readOnly bool, options []string) ([]string, error) {
	if err := unix.Mount(src, dir, "", unix.MS_BIND, ""); err != nil {
		return nil, fmt.Errorf("bind-mount %s on %s: %w", src, dir, err)
	}
	var flags uintptr
	if readOnly {
		flags |= unix.MS_RDONLY
	}
	var ignored []string
	for _, o := range options {
		if f, ok := bindFlags[o]; ok {
			flags |= f
		} else if o != "rw" && o != "bind" {
			ignored = append(ignored, o)
		}
	}
	if flags == 0 {
		return ignored, nil
	}
	if err := unix.Mount("", dir, "", unix.MS_BIND|unix.MS_REMOUNT|flags, ""); err != nil {
		_ = unmount(dir)
		return nil, fmt.Errorf("remount %s with %v: %w", dir, options, err)
	}
	return ignored, nil
}

// nfsUnmountTimeout is how long an NFS unmount may take before it is
// forced (upstream's nfs plugin: a minute, then umount -f).
const nfsUnmountTimeout = time.Minute

// unmount unmounts dir; a busy mount is detached lazily so teardown
// completes. An NFS mount whose server is gone can hang its unmount: after
// nfsUnmountTimeout it is forced (MNT_FORCE), then detached.
func unmount(dir string) error {
	fsType, _ := mountFSType(dir)
	return unmountFS(dir, fsType)
}

// unmountFS is unmount of a mount of fsType (as mountinfo shows it).
func unmountFS(dir, fsType string) error {
	if strings.HasPrefix(fsType, "nfs") {
		done := make(chan error, 1)
		go func() {
			defer logging.HandleCrash(nil, "nfs unmount")
			done <- unix.Unmount(dir, 0)
		}()
		select {
		case err := <-done:
			return unmountResult(dir, err)
		case <-time.After(nfsUnmountTimeout):
		}
		err := unix.Unmount(dir, unix.MNT_FORCE)
		if err != nil {
			err = unix.Unmount(dir, unix.MNT_DETACH)
		}
		return unmountResult(dir, err)
	}
	return unmountResult(dir, unix.Unmount(dir, 0))
}

// unmountResult detaches a busy mount lazily and ignores "not mounted".
func unmountResult(dir string, err error) error {
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(dir, unix.MNT_DETACH)
	}
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

func readMountInfo() ([]procfs.Mount, error) { return procfs.ReadMountinfo(mountInfoPath) }

// resolve returns path with symlinks resolved (as mountinfo shows it).
func resolve(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", path, err)
	}
	return real, nil
}

// mountPointsUnder lists the mount points at or below dir, deepest first.
func mountPointsUnder(dir string) ([]string, error) {
	mounts, err := mountsUnder(dir)
	out := make([]string, 0, len(mounts))
	for _, mt := range mounts {
		out = append(out, mt.MountPoint)
	}
	return out, err
}

// mountsUnder is mountPointsUnder with each mount's entry (the first one of
// a mount point) for its file system type.
func mountsUnder(dir string) ([]procfs.Mount, error) {
	real, err := resolve(dir)
	if err != nil {
		return nil, err
	}
	entries, err := readMountInfo()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []procfs.Mount
	for _, e := range entries {
		if (e.MountPoint == real || strings.HasPrefix(e.MountPoint, real+"/")) && !seen[e.MountPoint] {
			seen[e.MountPoint] = true
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].MountPoint, out[j].MountPoint
		if di, dj := strings.Count(a, "/"), strings.Count(b, "/"); di != dj {
			return di > dj
		}
		return a > b
	})
	return out, nil
}

// mountFSType returns the file system type mounted exactly at dir, or "" if dir is not
// a mount point. With several mounts stacked, the top one counts.
func mountFSType(dir string) (string, error) {
	real, err := resolve(dir)
	if err != nil {
		return "", err
	}
	entries, err := readMountInfo()
	if err != nil {
		return "", err
	}
	fsType := ""
	for _, e := range entries {
		if e.MountPoint == real {
			fsType = e.FSType
		}
	}
	return fsType, nil
}

// runMount runs mount(8) with args (a file system its helper mounts, such as
// nfs) and returns its output.
func runMount(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "mount", args...).CombinedOutput()
	return string(out), err
}
