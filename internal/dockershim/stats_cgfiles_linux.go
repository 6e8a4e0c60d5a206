package dockershim

import (
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
)

// Cgroup files stay open between stats requests (cgroups.HeldFiles: one pread per
// file instead of open, read and close). Files are closed when their container dies
// or is removed (statsCollector observes Docker's events), when their cgroup is
// removed, and when no request read them for statsFileIdle.

// cgroupFiles keeps cgroup files open, by path.
type cgroupFiles = cgroups.HeldFiles

func newCgroupFiles() *cgroupFiles { return cgroups.NewHeldFiles() }

// sampleHeld reads what cgroups.ReadSample reads, through the held files.
func sampleHeld(c *cgroupFiles, p cgroupPaths, now time.Time) (cgroups.Sample, error) {
	return c.Sample(p.cgroupfs(), now)
}
