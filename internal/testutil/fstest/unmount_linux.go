package fstest

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// UnmountUnder lazily unmounts every mount point below dir (as
// /proc/self/mountinfo lists them), deepest first, so that dir can be removed:
// a test's leftover bind mounts (the shim's netns pins, a daemon's overlays).
// Mount points already gone are no error.
func UnmountUnder(dir string) error {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	var mps []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		if mp := strings.ReplaceAll(fields[4], `\040`, " "); strings.HasPrefix(mp, prefix) {
			mps = append(mps, mp)
		}
	}
	sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
	var errs []error
	for _, mp := range mps {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
		}
	}
	return errors.Join(errs...)
}
