package volumes

import (
	"path/filepath"

	"golang.org/x/sys/unix"
)

// fsSize returns the size in bytes of the file system holding path or its nearest
// existing parent.
func fsSize(path string) (int64, bool) {
	for p := path; ; p = filepath.Dir(p) {
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err == nil {
			return int64(st.Blocks) * st.Bsize, true
		}
		if p == filepath.Dir(p) {
			return 0, false
		}
	}
}
