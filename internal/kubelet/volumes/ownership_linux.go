package volumes

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxOwnershipDepth bounds the fsGroup walk, which holds one directory
// descriptor per level: no path deeper than this fits in PATH_MAX, so the
// path-based walk upstream does failed there too.
const maxOwnershipDepth = 2048

// changeOwnership is the fsGroup walk of setVolumeOwnership. It goes by file
// descriptors, never by path: each entry is opened O_PATH|O_NOFOLLOW relative
// to its parent directory's descriptor, and what it is (fstat), its group
// (fchownat on the descriptor) and its mode are taken and changed through that
// descriptor. A symbolic link is therefore only ever the link itself (its
// group changes, nothing it points at), and a directory replaced by a link
// after its parent was listed is not entered. dir itself is opened the same
// way, so it is not followed either when it is a link.
func changeOwnership(dir string, gid int, readOnly bool) error {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	w := ownershipWalk{gid: gid, mask: uint32(rwMask)}
	if readOnly {
		w.mask = uint32(roMask)
	}
	return w.entry(fd, dir, 0)
}

// ownershipWalk is one run of changeOwnership.
type ownershipWalk struct {
	gid  int
	mask uint32 // group bits every entry but a link gets; directories also get execMask and setgid
}

// entry changes the entry open (O_PATH) at fd, and closes fd. A directory's
// entries are changed before the directory itself, as upstream's walk does.
// The mode is read before the group changes, since chown clears the setuid
// and setgid bits of an executable, and written back with the group bits
// added.
func (w *ownershipWalk) entry(fd int, path string, depth int) error {
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		// A link's own mode means nothing, and chmod would reach its target.
		return w.chown(fd, path)
	case unix.S_IFDIR:
		return w.dir(fd, path, st.Mode, depth)
	default:
		if err := w.chown(fd, path); err != nil {
			return err
		}
		// fchmod refuses an O_PATH descriptor; its /proc/self/fd link names
		// exactly the inode opened, whatever has happened to the path since.
		// No open for reading: a FIFO would block and a device could act.
		proc := "/proc/self/fd/" + strconv.Itoa(fd)
		if err := unix.Fchmodat(unix.AT_FDCWD, proc, st.Mode&0o7777|w.mask, 0); err != nil {
			return &os.PathError{Op: "chmod", Path: path, Err: err}
		}
		return nil
	}
}

// dir changes the entries of the directory open (O_PATH) at fd, in name
// order, then the directory.
func (w *ownershipWalk) dir(fd int, path string, mode uint32, depth int) error {
	if depth >= maxOwnershipDepth {
		return fmt.Errorf("%s: more than %d directories deep", path, maxOwnershipDepth)
	}
	dfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	d := os.NewFile(uintptr(dfd), path)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, name := range names {
		child := filepath.Join(path, name)
		cfd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return &os.PathError{Op: "openat", Path: child, Err: err}
		}
		if err := w.entry(cfd, child, depth+1); err != nil {
			return err
		}
	}
	if err := w.chown(fd, path); err != nil {
		return err
	}
	if err := unix.Fchmod(dfd, mode&0o7777|w.mask|uint32(execMask)|unix.S_ISGID); err != nil {
		return &os.PathError{Op: "fchmod", Path: path, Err: err}
	}
	return nil
}

// chown gives the entry open at fd (a link itself, not its target) the group.
func (w *ownershipWalk) chown(fd int, path string) error {
	if err := unix.Fchownat(fd, "", -1, w.gid, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "lchown", Path: path, Err: err}
	}
	return nil
}
