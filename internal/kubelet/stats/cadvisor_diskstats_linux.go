package stats

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
	"github.com/kubelet-dockershim/kubelet/internal/procfs"
)

// The diskstats-based filesystem series of /metrics/cadvisor
// (container_fs_reads_merged_total, container_fs_sector_reads_total,
// container_fs_read_seconds_total, container_fs_io_current, ... and the
// filesystem part of container_fs_reads_total/container_fs_writes_total):
//
//   - the root row's partitions carry the /proc/diskstats counters of their
//     device, as cAdvisor's GetFsInfoForPath gives them: only the lines whose
//     kernel name is sd*, vd*, xvd* or dm-N count (its partitionRegex; nvme,
//     mmcblk, md, loop... devices read 0), a partition takes the line named
//     /dev/<name> as its device label, else the line with its device number;
//     one with neither (tmpfs, overlay) reads 0;
//   - /proc/diskstats is read once per reading of the partitions (every
//     cadvisorSpecPeriod, with their statfs, as cAdvisor reads it with the
//     statfs of the root's housekeeping), not per scrape;
//   - container rows' filesystems carry zeros: the dockershim-era Docker
//     handler set only the device, limit and usage of a container's FsStats.

// readDiskstats sets every partition's counters from /proc/diskstats. A
// missing file leaves them at 0 (cAdvisor warns and reads none); another
// failure is logged and keeps the last counters.
func (c *cadvisor) readDiskstats() {
	parts := c.fs.parts
	if len(parts) == 0 {
		return
	}
	path := filepath.Join(c.p.host.procRoot, "diskstats")
	err := c.files.ReadUnheld(path, func(b []byte) error { return setDiskstats(b, parts) })
	if errors.Is(err, cgroups.ErrGone) {
		for _, p := range parts {
			p.disk = diskStats{}
		}
		return
	}
	if err != nil {
		c.p.logger.Debug("cadvisor diskstats", zap.Error(err))
	}
}

// setDiskstats gives each partition the counters of its /proc/diskstats line
// (b): the line whose name is the partition's device label first, else the
// one with its device number, else zeros. A line of a counted device that
// does not parse is skipped and reported.
func setDiskstats(b []byte, parts []*partition) error {
	byName := make([]bool, len(parts))
	for _, p := range parts {
		p.disk = diskStats{}
	}
	var bad error
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		majF, rest := nextField(line)
		minF, rest := nextField(rest)
		name, rest := nextField(rest)
		if !diskstatsCounted(name) {
			continue
		}
		major, okMaj := procfs.ParseUint(majF)
		minor, okMin := procfs.ParseUint(minF)
		d, okVals := parseDiskCounters(rest)
		if !okMaj || !okMin || !okVals {
			bad = fmt.Errorf("malformed /proc/diskstats line %q", line)
			continue
		}
		for i, p := range parts {
			dev, isDev := strings.CutPrefix(p.key, "/dev/")
			switch {
			case isDev && dev == string(name):
				p.disk, byName[i] = d, true
			case !byName[i] && p.major == major && p.minor == minor:
				p.disk = d
			}
		}
	}
	return bad
}

// parseDiskCounters reads the first len(diskStats) counters of a diskstats
// line (after its name); false when fewer are there or one is no number.
func parseDiskCounters(b []byte) (diskStats, bool) {
	var d diskStats
	for i := range d {
		var f []byte
		f, b = nextField(b)
		v, ok := procfs.ParseUint(f)
		if !ok {
			return diskStats{}, false
		}
		d[i] = v
	}
	return d, true
}

// diskstatsCounted reports whether cAdvisor counts a diskstats device:
// its name is (s|v|xv)d, letters, then digits or none, or dm-<digits>.
func diskstatsCounted(name []byte) bool {
	if rest, ok := bytes.CutPrefix(name, []byte("dm-")); ok {
		return len(rest) > 0 && allDigits(rest)
	}
	var rest []byte
	switch {
	case bytes.HasPrefix(name, []byte("xvd")):
		rest = name[3:]
	case bytes.HasPrefix(name, []byte("sd")), bytes.HasPrefix(name, []byte("vd")):
		rest = name[2:]
	default:
		return false
	}
	letters := 0
	for letters < len(rest) && rest[letters] >= 'a' && rest[letters] <= 'z' {
		letters++
	}
	return letters > 0 && allDigits(rest[letters:])
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// nextField returns the first field of b (space or tab separated) and what
// follows it.
func nextField(b []byte) (field, rest []byte) {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	j := i
	for j < len(b) && b[j] != ' ' && b[j] != '\t' {
		j++
	}
	return b[i:j], b[j:]
}
