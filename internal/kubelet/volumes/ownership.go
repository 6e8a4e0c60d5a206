package volumes

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Permission bits added for the fsGroup (upstream's SetVolumeOwnership).
const (
	rwMask   os.FileMode = 0o660
	roMask   os.FileMode = 0o440
	execMask os.FileMode = 0o110
)

// setVolumeOwnership gives the tree at dir to group fsGroup: every entry is chgrp'ed
// (symlinks themselves, not their targets), files get group read (and write unless
// readOnly), directories also group search and the setgid bit so new files inherit the
// group. A nil fsGroup does nothing.
func setVolumeOwnership(dir string, fsGroup *int64, readOnly bool) error {
	if fsGroup == nil {
		return nil
	}
	gid := int(*fsGroup)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, gid); err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mask := rwMask
		if readOnly {
			mask = roMask
		}
		if info.IsDir() {
			mask |= os.ModeSetgid | execMask
		}
		return os.Chmod(path, info.Mode()&(os.ModePerm|os.ModeSetgid|os.ModeSetuid|os.ModeSticky)|mask)
	})
	if err != nil {
		return fmt.Errorf("set fsGroup %d on %s: %w", gid, dir, err)
	}
	return nil
}
