package volumes

import (
	"fmt"
	"os"
	"syscall"

	v1 "k8s.io/api/core/v1"
)

// Permission bits added for the fsGroup (upstream's SetVolumeOwnership).
const (
	rwMask   os.FileMode = 0o660
	roMask   os.FileMode = 0o440
	execMask os.FileMode = 0o110
)

// setVolumeOwnership gives the tree at dir to group fsGroup, as upstream's
// SetVolumeOwnership does: every entry is chgrp'ed (symlinks themselves, not
// their targets), files get group read (and write unless readOnly),
// directories also group search and the setgid bit so new files inherit the
// group. A nil fsGroup does nothing. The walk (changeOwnership) never leaves
// the tree: a pod sharing the volume can swap any entry for a symbolic link
// while it runs.
func setVolumeOwnership(dir string, fsGroup *int64, readOnly bool) error {
	if fsGroup == nil {
		return nil
	}
	gid := int(*fsGroup)
	if err := changeOwnership(dir, gid, readOnly); err != nil {
		return fmt.Errorf("set fsGroup %d on %s: %w", gid, dir, err)
	}
	return nil
}

// setVolumeOwnershipPolicy is setVolumeOwnership of a writable volume under
// the pod's fsGroupChangePolicy: OnRootMismatch skips the walk when the
// volume's root already has the group, its permission bits and the setgid
// bit (upstream's check); Always (or none) walks the tree.
func setVolumeOwnershipPolicy(dir string, fsGroup *int64, policy *v1.PodFSGroupChangePolicy) error {
	if fsGroup == nil {
		return nil
	}
	if policy != nil && *policy == v1.FSGroupChangeOnRootMismatch && !ownershipMismatch(dir, *fsGroup) {
		return nil
	}
	return setVolumeOwnership(dir, fsGroup, false)
}

// ownershipMismatch reports whether the root of a writable volume lacks the
// group, its group permissions or (for a directory) the setgid bit.
func ownershipMismatch(dir string, fsGroup int64) bool {
	fi, err := os.Lstat(dir)
	if err != nil {
		return true
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int64(st.Gid) != fsGroup || !fi.IsDir() {
		return true
	}
	want := rwMask | execMask
	return fi.Mode().Perm()&want != want || fi.Mode()&os.ModeSetgid == 0
}
