package cgroups

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/procfs"
)

// CadvisorDirs are one cgroup's directories /metrics/cadvisor reads: its
// directories in the v1 hierarchies ("" for one not mounted), or its
// directory in the cgroup2 hierarchy (Unified) on a v2 host.
type CadvisorDirs struct {
	CPU, CPUAcct, Memory, Blkio string
	// BlkioFile is the blkio file to read the byte counts from (BlkioFileV1's
	// choice); "" reads none. The operation counts are read from its
	// io_serviced sibling.
	BlkioFile string
	// Unified is the cgroup's directory in the cgroup2 hierarchy on a v2
	// host; the v1 fields are "" then.
	Unified string

	files *v1Files // the stats files' paths, joined at the first read
}

// v1Files are the paths of the files ReadCadvisor reads (on v2: cpuStat,
// memUsage, memStat, memMaxUsage, swap and io).
type v1Files struct {
	cpuStat, cpuacctUsage, cpuacctStat         string
	memUsage, memStat, memMaxUsage, memFailcnt string
	swap, io                                   string
	serviced, servicedOf                       string // the io_serviced of the BlkioFile servicedOf
}

func (d *CadvisorDirs) paths() *v1Files {
	if d.files != nil {
		return d.files
	}
	join := func(dir, name string) string {
		if dir == "" {
			return ""
		}
		return filepath.Join(dir, name)
	}
	if u := d.Unified; u != "" {
		d.files = &v1Files{
			cpuStat: join(u, "cpu.stat"), memUsage: join(u, "memory.current"), memStat: join(u, "memory.stat"),
			memMaxUsage: join(u, "memory.peak"),
			swap:        join(u, "memory.swap.current"), io: join(u, "io.stat"),
		}
		return d.files
	}
	d.files = &v1Files{
		cpuStat: join(d.CPU, "cpu.stat"), cpuacctUsage: join(d.CPUAcct, "cpuacct.usage"), cpuacctStat: join(d.CPUAcct, "cpuacct.stat"),
		memUsage: join(d.Memory, "memory.usage_in_bytes"), memStat: join(d.Memory, "memory.stat"),
		memMaxUsage: join(d.Memory, "memory.max_usage_in_bytes"), memFailcnt: join(d.Memory, "memory.failcnt"),
	}
	return d.files
}

// Dirs are the directories of d that exist in some hierarchy, for releasing
// their held files.
func (d *CadvisorDirs) Dirs() []string {
	return []string{d.CPU, d.CPUAcct, d.Memory, d.Blkio, d.Unified}
}

// ProcsDir is a directory of d whose cgroup.procs lists its processes: the
// v1 memory one, else the cgroup2 one.
func (d *CadvisorDirs) ProcsDir() string {
	if d.Memory != "" {
		return d.Memory
	}
	return d.Unified
}

// CadvisorStats are a cgroup's figures as cAdvisor (runc's fs and fs2 cgroup
// managers) reads them. Times are in nanoseconds, memory in bytes.
type CadvisorStats struct {
	HasCPU                       bool
	CPUUsage, CPUUser, CPUSystem uint64 // cpuacct.usage; cpuacct.stat user and system
	HasThrottling                bool
	Periods, Throttled           uint64 // cpu.stat nr_periods, nr_throttled
	ThrottledTime                uint64 // cpu.stat throttled_time

	HasMemory                         bool
	MemUsage, MemMaxUsage, MemFailcnt uint64
	WorkingSet                        uint64 // usage - total_inactive_file, floored at 0
	RSS, Cache, Swap, MappedFile      uint64 // memory.stat total_* (plain without hierarchy)

	// IO is the bytes read and written per device (blkio), nil when unknown.
	IO []DeviceIO
}

// DeviceIO is one device's blkio counts: bytes per operation and, when the
// cgroup's io_serviced (v2: io.stat rios and wios) lists the device, the reads
// and writes completed.
type DeviceIO struct {
	Major, Minor uint64
	Read, Write  uint64
	// Bytes are the bytes per operation in BlkioOps order; OpsSeen has bit i
	// set when the file listed BlkioOps[i] (v1 lists them all, v2 only Read
	// and Write).
	Bytes   [len(BlkioOps)]uint64
	OpsSeen uint8
	// Reads and Writes are completed operations; HasServiced when known.
	Reads, Writes uint64
	HasServiced   bool
}

// BlkioOps are the operations of a v1 blkio io_service_bytes file, in the
// order their series sort (cAdvisor's container_blkio_device_usage_total).
var BlkioOps = [...]string{"Async", "Discard", "Read", "Sync", "Total", "Write"}

// blkioOp is the index of op in BlkioOps, -1 for another.
func blkioOp(op []byte) int {
	for i, o := range BlkioOps {
		if string(op) == o {
			return i
		}
	}
	return -1
}

// setBytes records op's byte count.
func (d *DeviceIO) setBytes(op int, v uint64) {
	d.Bytes[op], d.OpsSeen = v, d.OpsSeen|1<<op
	switch op {
	case blkioOpRead:
		d.Read = v
	case blkioOpWrite:
		d.Write = v
	}
}

// CadvisorSpec is a cgroup's configuration as cAdvisor reports it.
type CadvisorSpec struct {
	HasCPU bool
	Shares uint64 // cpu.shares (v2: from cpu.weight, as cAdvisor converts it)
	Period uint64 // cpu.cfs_period_us (v2: cpu.max's period)
	Quota  uint64 // cpu.cfs_quota_us (v2: cpu.max's quota); 0 when unlimited

	HasMemory bool
	// v1: memory.limit_in_bytes, memsw.limit_in_bytes, soft_limit_in_bytes;
	// v2: memory.max, memory.swap.max and memory.min, "max" read as 2^64-1
	// as cAdvisor reads it.
	Limit, SwapLimit, Reservation uint64
}

// userHZ is the unit of cpuacct.stat (USER_HZ, 100 on every Linux ABI).
const userHZ = 100

// ReadCadvisor reads d's statistics into s through the held files. The memory
// hierarchy must be readable (a removed cgroup matches ErrGone); the others are
// optional. On v2 the cgroup's cpu.stat must be readable; the root cgroup
// has no memory.current, and s.HasMemory is false for it.
// The paths are joined once and kept in d.
func (c *HeldFiles) ReadCadvisor(d *CadvisorDirs, now time.Time, s *CadvisorStats) error {
	*s = CadvisorStats{IO: s.IO[:0]}
	f := d.paths()
	if d.Unified != "" {
		return c.readCadvisorV2(f, now, s)
	}
	if d.Memory != "" {
		if err := c.readMemoryV1(f, now, s); err != nil {
			return err
		}
	}
	if d.CPUAcct != "" {
		c.readCPUAcctV1(f, now, s)
	}
	if d.CPU != "" {
		_ = c.ReadFile(f.cpuStat, now, func(b []byte) error {
			EachKeyed(b, func(k, v []byte) {
				switch string(k) {
				case "nr_periods":
					s.Periods, s.HasThrottling = atou(v), true
				case "nr_throttled":
					s.Throttled = atou(v)
				case "throttled_time":
					s.ThrottledTime = atou(v)
				}
			})
			return nil
		})
	}
	if d.BlkioFile != "" {
		_ = c.ReadFile(d.BlkioFile, now, func(b []byte) error {
			s.IO = ParseBlkio(b, s.IO)
			return nil
		})
		if len(s.IO) > 0 {
			if f.servicedOf != d.BlkioFile { // the bytes file is chosen again now and then
				f.serviced, f.servicedOf = strings.Replace(d.BlkioFile, "io_service_bytes", "io_serviced", 1), d.BlkioFile
			}
			_ = c.ReadFile(f.serviced, now, func(b []byte) error {
				ParseBlkioServiced(b, s.IO)
				return nil
			})
		}
	}
	return nil
}

func (c *HeldFiles) readCPUAcctV1(f *v1Files, now time.Time, s *CadvisorStats) {
	usage, err := c.ReadUint(f.cpuacctUsage, now)
	if err != nil {
		return
	}
	s.CPUUsage, s.HasCPU = usage, true
	_ = c.ReadFile(f.cpuacctStat, now, func(b []byte) error {
		EachKeyed(b, func(k, v []byte) {
			switch string(k) {
			case "user":
				s.CPUUser = atou(v) * (uint64(time.Second) / userHZ)
			case "system":
				s.CPUSystem = atou(v) * (uint64(time.Second) / userHZ)
			}
		})
		return nil
	})
}

func (c *HeldFiles) readMemoryV1(f *v1Files, now time.Time, s *CadvisorStats) error {
	usage, err := c.ReadUint(f.memUsage, now)
	if err != nil {
		return err
	}
	var plain, total [5]uint64 // inactive_file, rss, cache, swap, mapped_file
	var hasTotal [5]bool
	err = c.ReadFile(f.memStat, now, func(b []byte) error {
		EachKeyed(b, func(k, v []byte) {
			key, isTotal := bytes.CutPrefix(k, []byte("total_"))
			i := memStatIndex(key)
			if i < 0 {
				return
			}
			if isTotal {
				total[i], hasTotal[i] = atou(v), true
			} else {
				plain[i] = atou(v)
			}
		})
		return nil
	})
	if err != nil {
		return err
	}
	for i := range plain {
		if hasTotal[i] {
			plain[i] = total[i]
		}
	}
	s.HasMemory, s.MemUsage = true, usage
	s.WorkingSet = subFloor(usage, plain[0])
	s.RSS, s.Cache, s.Swap, s.MappedFile = plain[1], plain[2], plain[3], plain[4]
	s.MemMaxUsage, _ = c.ReadUint(f.memMaxUsage, now)
	s.MemFailcnt, _ = c.ReadUint(f.memFailcnt, now)
	return nil
}

func memStatIndex(k []byte) int {
	switch string(k) {
	case "inactive_file":
		return 0
	case "rss":
		return 1
	case "cache":
		return 2
	case "swap":
		return 3
	case "mapped_file":
		return 4
	}
	return -1
}

// blkioFiles are the byte counters runc tries, in its order: BFQ, CFQ, then the
// throttling layer's (which counts every device).
var blkioFiles = [...]string{
	"blkio.bfq.io_service_bytes_recursive",
	"blkio.io_service_bytes_recursive",
	"blkio.throttle.io_service_bytes_recursive",
}

// BlkioFileV1 picks the blkio file of dir that ReadCadvisor reads (CadvisorDirs.BlkioFile):
// the first of blkioFiles that lists a device, else the last one that exists
// (a cgroup that did no I/O yet); "" when none exists. Callers choose again now
// and then: which file lists devices can change as the cgroup does I/O.
func (c *HeldFiles) BlkioFileV1(dir string) string {
	if dir == "" {
		return ""
	}
	var now time.Time
	exists := ""
	for _, name := range blkioFiles {
		path := filepath.Join(dir, name)
		devices := false
		err := c.ReadFile(path, now, func(b []byte) error {
			devices = len(ParseBlkio(b, nil)) > 0
			return nil
		})
		if err != nil {
			continue
		}
		if devices {
			return path
		}
		exists = path
	}
	return exists
}

// ParseBlkio appends the devices of a blkio io_service_bytes file ("major:minor Op
// value" lines, and a final "Total value") to out, one entry per device.
func ParseBlkio(b []byte, out []DeviceIO) []DeviceIO {
	eachBlkioLine(b, func(d DeviceIO, op, v []byte) {
		if len(out) == 0 || out[len(out)-1].Major != d.Major || out[len(out)-1].Minor != d.Minor {
			out = append(out, d)
		}
		if i := blkioOp(op); i >= 0 {
			out[len(out)-1].setBytes(i, atou(v))
		}
	})
	return out
}

// ParseBlkioServiced sets the reads and writes completed of the devices of
// io (from ParseBlkio) that a blkio io_serviced file lists.
func ParseBlkioServiced(b []byte, io []DeviceIO) {
	eachBlkioLine(b, func(d DeviceIO, op, v []byte) {
		for i := range io {
			if io[i].Major != d.Major || io[i].Minor != d.Minor {
				continue
			}
			switch string(op) {
			case "Read":
				io[i].Reads, io[i].HasServiced = atou(v), true
			case "Write":
				io[i].Writes, io[i].HasServiced = atou(v), true
			}
			return
		}
	})
}

// eachBlkioLine calls fn with the device, operation and value of each
// "major:minor Op value" line of a v1 blkio file.
func eachBlkioLine(b []byte, fn func(d DeviceIO, op, value []byte)) {
	for len(b) > 0 {
		var line []byte
		line, b = NextLine(b)
		f := bytes.Fields(line)
		if len(f) != 3 {
			continue
		}
		if d, ok := parseDevice(f[0]); ok {
			fn(d, f[1], f[2])
		}
	}
}

// ReadCadvisorSpec reads d's configuration: cpu.shares, the CFS period and quota,
// and the memory limits. Unreadable files leave their part out.
func (c *HeldFiles) ReadCadvisorSpec(d CadvisorDirs) CadvisorSpec {
	var s CadvisorSpec
	var now time.Time // spec files are read rarely: not kept from pruning by these reads
	if d.Unified != "" {
		return c.readCadvisorSpecV2(d.Unified)
	}
	if d.CPU != "" {
		shares, err := c.ReadUint(filepath.Join(d.CPU, "cpu.shares"), now)
		if err == nil {
			s.HasCPU, s.Shares = true, shares
			s.Period, _ = c.ReadUint(filepath.Join(d.CPU, "cpu.cfs_period_us"), now)
			if q, err := c.ReadInt(filepath.Join(d.CPU, "cpu.cfs_quota_us"), now); err == nil && q > 0 {
				s.Quota = uint64(q)
			}
		}
	}
	if d.Memory != "" {
		limit, err := c.ReadUint(filepath.Join(d.Memory, "memory.limit_in_bytes"), now)
		if err == nil {
			s.HasMemory, s.Limit = true, limit
			s.SwapLimit, _ = c.ReadUint(filepath.Join(d.Memory, "memory.memsw.limit_in_bytes"), now)
			s.Reservation, _ = c.ReadUint(filepath.Join(d.Memory, "memory.soft_limit_in_bytes"), now)
		}
	}
	return s
}

// errNotNumber is what atou's callers never see: a malformed field reads as 0.
var errNotNumber = errors.New("not a number")

// atou parses a decimal unsigned number; anything else is 0.
func atou(b []byte) uint64 {
	v, err := parseUintBytes(b)
	if err != nil {
		return 0
	}
	return v
}

func parseUintBytes(b []byte) (uint64, error) {
	v, ok := procfs.ParseUint(b)
	if !ok || len(b) > 20 {
		return 0, errNotNumber
	}
	return v, nil
}

// Created is the oldest modification time of the directories and their
// cgroup.clone_children (v2: cgroup.events), cAdvisor's creation time of a
// raw cgroup; zero when none can be read.
func (d CadvisorDirs) Created() time.Time {
	var oldest time.Time
	marker := "cgroup.clone_children"
	if d.Unified != "" {
		marker = "cgroup.events"
	}
	for _, dir := range d.Dirs() {
		if dir == "" {
			continue
		}
		for _, p := range []string{dir, filepath.Join(dir, marker)} {
			if fi, err := os.Stat(p); err == nil && (oldest.IsZero() || fi.ModTime().Before(oldest)) {
				oldest = fi.ModTime()
			}
		}
	}
	return oldest
}

// FirstProc is the first process listed in the cgroup directory dir's
// cgroup.procs, 0 when none (or dir is ""). The file is not held open.
func (c *HeldFiles) FirstProc(dir string) int {
	if dir == "" {
		return 0
	}
	pid := 0
	_ = c.ReadUnheld(filepath.Join(dir, "cgroup.procs"), func(b []byte) error {
		line, _, _ := bytes.Cut(b, []byte{'\n'})
		pid, _ = strconv.Atoi(string(bytes.TrimSpace(line)))
		return nil
	})
	return pid
}

// parseDevice reads a "major:minor" field (blkio and io.stat lines).
func parseDevice(field []byte) (DeviceIO, bool) {
	majS, minS, ok := bytes.Cut(field, []byte{':'})
	return DeviceIO{Major: atou(majS), Minor: atou(minS)}, ok
}

// The indexes of Read and Write in BlkioOps.
const (
	blkioOpRead  = 2
	blkioOpWrite = 5
)
