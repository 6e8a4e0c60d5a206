package csi

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"

	"github.com/kubelet-dockershim/kubelet/internal/procfs"
)

// isMountPoint reports whether /proc/self/mountinfo lists path (symlinks
// resolved) as a mount point. A missing path is not one.
func isMountPoint(path string) (bool, error) {
	real, err := filepath.EvalSymlinks(path)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && procfs.UnescapeMountinfo(fields[4]) == real {
			return true, nil
		}
	}
	return false, sc.Err()
}
