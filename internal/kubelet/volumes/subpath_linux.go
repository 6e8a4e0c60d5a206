package volumes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

const (
	// maxOpenat2Retries bounds the retries of an openat2 that answered EAGAIN
	// (a rename or mount raced with a ".." step of RESOLVE_BENEATH).
	maxOpenat2Retries = 256
	// maxSymlinks is the kernel's limit of symbolic links in one lookup
	// (MAXSYMLINKS), applied by the user-space walk.
	maxSymlinks = 40
)

// lookupFunc opens rel below the directory rootFD without ever leaving it and
// returns an O_PATH descriptor. A trailing symbolic link is followed (inside
// the tree). An escape is unix.EXDEV.
type lookupFunc func(rootFD int, rel string) (int, error)

// BindSubPath resolves sp.Path below sp.VolumePath without leaving the volume,
// creating missing directories (with the volume root's mode), and bind-mounts
// the opened file or directory, through its descriptor, on
// <PodDir>/volume-subpaths/<volume>/<container>/<index>, the path it returns.
// That path is what the runtime mounts, so the user-controlled path is never
// resolved again (upstream's fix of CVE-2017-1002101 and CVE-2021-25741).
//
// Resolution uses openat2(RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS): symbolic
// links are followed while they stay inside the volume; absolute ones and
// those climbing above its root are ErrSubPathEscapes. Kernels without openat2
// (before 5.6) get the same rule walked one component at a time with
// openat(O_NOFOLLOW). A mount already at the target of the same file is
// reused (a restarted container); one of another file is replaced.
func BindSubPath(sp SubPath) (string, error) {
	return bindSubPath(sp, nil)
}

// bindSubPath is BindSubPath with the lookup chosen by the caller (nil:
// openat2, or the walk where the kernel lacks it).
func bindSubPath(sp SubPath, lookup lookupFunc) (string, error) {
	comps, err := sp.components()
	if err != nil {
		return "", err
	}
	rootFD, err := unix.Open(sp.VolumePath, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("open volume %s: %w", sp.VolumePath, err)
	}
	defer unix.Close(rootFD)
	var st unix.Stat_t
	if err := unix.Fstat(rootFD, &st); err != nil {
		return "", fmt.Errorf("stat volume %s: %w", sp.VolumePath, err)
	}
	if lookup == nil {
		lookup = chooseLookup(rootFD)
	}
	fd, err := openSubPath(lookup, rootFD, comps, st.Mode&0o7777)
	if errors.Is(err, unix.EXDEV) {
		return "", fmt.Errorf("subPath %q of volume %s: %w", sp.Path, sp.VolumePath, ErrSubPathEscapes)
	}
	if err != nil {
		return "", fmt.Errorf("subPath %q of volume %s: %w", sp.Path, sp.VolumePath, err)
	}
	defer unix.Close(fd)
	target := sp.target()
	if err := bindFD(fd, target); err != nil {
		return "", fmt.Errorf("subPath %q of volume %s: %w", sp.Path, sp.VolumePath, err)
	}
	return target, nil
}

// chooseLookup returns openat2Beneath, or walkBeneath on a kernel without
// openat2 (ENOSYS).
func chooseLookup(rootFD int) lookupFunc {
	fd, err := openat2Beneath(rootFD, ".")
	if errors.Is(err, unix.ENOSYS) {
		return walkBeneath
	}
	if err == nil {
		unix.Close(fd)
	}
	return openat2Beneath
}

// openat2Beneath is the kernel's lookup: RESOLVE_BENEATH refuses absolute
// symbolic links and ".." above rootFD, RESOLVE_NO_MAGICLINKS refuses
// /proc/<pid>/fd-style links.
func openat2Beneath(rootFD int, rel string) (int, error) {
	how := unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	}
	for i := 0; ; i++ {
		fd, err := unix.Openat2(rootFD, rel, &how)
		if (errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR)) && i < maxOpenat2Retries {
			continue
		}
		return fd, err
	}
}

// walkBeneath is openat2Beneath for kernels without openat2 (upstream's
// doSafeOpen, but following links that stay inside): every component is
// opened with openat(O_PATH|O_NOFOLLOW) relative to the directory held
// before it, a symbolic link is read with readlinkat and its target expanded
// in place (absolute: an escape), and ".." returns to the directory held one
// level up (above rootFD: an escape). No component is looked up by a path
// string, so a link swapped in meanwhile is seen as a link.
func walkBeneath(rootFD int, rel string) (int, error) {
	stack := []int{rootFD} // stack[0] belongs to the caller
	defer func() {
		for _, fd := range stack[1:] {
			unix.Close(fd)
		}
	}()
	todo := strings.Split(rel, "/")
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(stack) == 1 {
				return -1, unix.EXDEV
			}
			unix.Close(stack[len(stack)-1])
			stack = stack[:len(stack)-1]
			continue
		}
		fd, err := unix.Openat(stack[len(stack)-1], c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			target, err := readlinkFD(fd)
			unix.Close(fd)
			if err != nil {
				return -1, err
			}
			if links++; links > maxSymlinks {
				return -1, unix.ELOOP
			}
			if target == "" {
				return -1, unix.ENOENT
			}
			if strings.HasPrefix(target, "/") {
				return -1, unix.EXDEV
			}
			todo = append(strings.Split(target, "/"), todo...)
			continue
		}
		stack = append(stack, fd)
	}
	top := stack[len(stack)-1]
	if len(stack) > 1 {
		stack = stack[:len(stack)-1] // handed to the caller, not closed
		return top, nil
	}
	return unix.FcntlInt(uintptr(top), unix.F_DUPFD_CLOEXEC, 0)
}

// readlinkFD reads the target of the symbolic link fd (an O_PATH|O_NOFOLLOW
// descriptor of the link itself).
func readlinkFD(fd int) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// openSubPath opens comps below rootFD with lookup and returns an O_PATH
// descriptor. Missing directories are created one at a time, each with
// mkdirat relative to a descriptor of its (safely opened) parent, and then
// looked up again from rootFD; a dangling link stays ENOENT.
func openSubPath(lookup lookupFunc, rootFD int, comps []string, perm uint32) (int, error) {
	fd, err := lookup(rootFD, joinRel(comps))
	if !errors.Is(err, unix.ENOENT) {
		return fd, err
	}
	for i := 1; i <= len(comps); i++ {
		fd, err := lookup(rootFD, joinRel(comps[:i]))
		if errors.Is(err, unix.ENOENT) {
			if err := mkdirBeneath(lookup, rootFD, comps[:i-1], comps[i-1], perm); err != nil {
				return -1, err
			}
			fd, err = lookup(rootFD, joinRel(comps[:i]))
		}
		if err != nil {
			return -1, err
		}
		if i == len(comps) {
			return fd, nil
		}
		unix.Close(fd)
	}
	return -1, unix.ENOENT // not reached: comps is not empty after an ENOENT
}

// mkdirBeneath creates the directory name in the directory parent (below
// rootFD) with mode perm. mkdirat is subject to the umask, so the mode is set
// again through a descriptor opened with O_NOFOLLOW|O_DIRECTORY (a link or a
// file swapped in is refused, never followed). An existing entry is left as it
// is.
func mkdirBeneath(lookup lookupFunc, rootFD int, parent []string, name string, perm uint32) error {
	pfd, err := lookup(rootFD, joinRel(parent))
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := unix.Mkdirat(pfd, name, perm); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return nil
		}
		return fmt.Errorf("create directory %q: %w", filepath.Join(joinRel(parent), name), err)
	}
	dfd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open created directory %q: %w", name, err)
	}
	defer unix.Close(dfd)
	if err := unix.Fchmod(dfd, perm); err != nil {
		return fmt.Errorf("chmod created directory %q: %w", name, err)
	}
	return nil
}

func joinRel(comps []string) string {
	if len(comps) == 0 {
		return "."
	}
	return strings.Join(comps, "/")
}

// bindFD bind-mounts the file or directory open as fd on target (through
// /proc/self/fd, a path the user cannot change). A mount already at target of
// the same file is kept; one of another file is detached first.
func bindFD(fd int, target string) error {
	var src unix.Stat_t
	if err := unix.Fstat(fd, &src); err != nil {
		return fmt.Errorf("stat opened subPath: %w", err)
	}
	mounted, err := isMountPoint(target)
	if err != nil {
		return err
	}
	if mounted {
		var cur unix.Stat_t
		if err := unix.Stat(target, &cur); err == nil && cur.Dev == src.Dev && cur.Ino == src.Ino {
			return nil
		}
		if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("detach stale subPath mount %s: %w", target, err)
		}
	}
	isDir := src.Mode&unix.S_IFMT == unix.S_IFDIR
	if err := prepareTarget(target, isDir); err != nil {
		return err
	}
	source := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		_ = os.Remove(target)
		return fmt.Errorf("bind-mount subPath on %s: %w", target, err)
	}
	return nil
}

// prepareTarget creates the (unmounted) mount point: a directory for a
// directory, an empty file for anything else. A leftover of the other kind
// (the subPath changed type) is replaced.
func prepareTarget(target string, isDir bool) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return fmt.Errorf("create subPath mount directory: %w", err)
	}
	if fi, err := os.Lstat(target); err == nil && fi.IsDir() != isDir {
		if err := os.Remove(target); err != nil {
			return fmt.Errorf("replace subPath mount point: %w", err)
		}
	}
	if isDir {
		if err := os.Mkdir(target, 0o750); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create subPath mount point: %w", err)
		}
		return nil
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY|unix.O_NOFOLLOW, 0o640)
	if err != nil {
		return fmt.Errorf("create subPath mount point: %w", err)
	}
	return f.Close()
}

// isMountPoint reports whether something is mounted exactly at path (per
// /proc/self/mountinfo); a missing path is not.
func isMountPoint(path string) (bool, error) {
	parent, err := filepath.EvalSymlinks(filepath.Dir(path))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("resolve %s: %w", filepath.Dir(path), err)
	}
	real := filepath.Join(parent, filepath.Base(path))
	entries, err := readMountInfo()
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if e.MountPoint == real {
			return true, nil
		}
	}
	return false, nil
}
