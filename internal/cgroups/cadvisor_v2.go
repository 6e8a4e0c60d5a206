package cgroups

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"time"
)

// readCadvisorV2 reads a cgroup2 directory's figures the way runc's fs2
// manager does for cAdvisor: cpu.stat (microseconds, turned to nanoseconds),
// memory.current and memory.stat (anon, file, file_mapped, inactive_file),
// memory.peak, memory.swap.current and io.stat's
// byte counts. cpu.stat must be readable; a cgroup without memory.current
// (the root) has no memory figures.
func (c *HeldFiles) readCadvisorV2(f *v1Files, now time.Time, s *CadvisorStats) error {
	err := c.ReadFile(f.cpuStat, now, func(b []byte) error {
		EachKeyed(b, func(k, v []byte) {
			switch string(k) {
			case "usage_usec":
				s.CPUUsage, s.HasCPU = atou(v)*1000, true
			case "user_usec":
				s.CPUUser = atou(v) * 1000
			case "system_usec":
				s.CPUSystem = atou(v) * 1000
			case "nr_periods":
				s.Periods, s.HasThrottling = atou(v), true
			case "nr_throttled":
				s.Throttled = atou(v)
			case "throttled_usec":
				s.ThrottledTime = atou(v) * 1000
			}
		})
		return nil
	})
	if err != nil {
		return err
	}
	if usage, err := c.ReadUint(f.memUsage, now); err == nil {
		var inactiveFile uint64
		err := c.ReadFile(f.memStat, now, func(b []byte) error {
			EachKeyed(b, func(k, v []byte) {
				switch string(k) {
				case "anon":
					s.RSS = atou(v)
				case "file":
					s.Cache = atou(v)
				case "file_mapped":
					s.MappedFile = atou(v)
				case "inactive_file":
					inactiveFile = atou(v)
				}
			})
			return nil
		})
		if err != nil {
			return err
		}
		s.HasMemory, s.MemUsage = true, usage
		s.WorkingSet = subFloor(usage, inactiveFile)
		s.MemMaxUsage, _ = c.ReadUint(f.memMaxUsage, now)
		s.Swap, _ = c.ReadUint(f.swap, now)
	}
	_ = c.ReadFile(f.io, now, func(b []byte) error {
		s.IO = ParseIOStat(b, s.IO)
		return nil
	})
	return nil
}

// ParseIOStat appends the devices of a cgroup2 io.stat ("major:minor
// rbytes=N wbytes=N rios=N ..." lines) to out, one entry per line.
func ParseIOStat(b []byte, out []DeviceIO) []DeviceIO {
	for len(b) > 0 {
		var line []byte
		line, b = NextLine(b)
		f := bytes.Fields(line)
		if len(f) < 2 {
			continue
		}
		d, ok := parseDevice(f[0])
		if !ok {
			continue
		}
		for _, kv := range f[1:] {
			k, v, ok := bytes.Cut(kv, []byte{'='})
			if !ok {
				continue
			}
			switch string(k) {
			case "rbytes":
				d.setBytes(blkioOpRead, atou(v))
			case "wbytes":
				d.setBytes(blkioOpWrite, atou(v))
			case "rios":
				d.Reads, d.HasServiced = atou(v), true
			case "wios":
				d.Writes, d.HasServiced = atou(v), true
			}
		}
		out = append(out, d)
	}
	return out
}

// readCadvisorSpecV2 reads a cgroup2 directory's configuration as cAdvisor
// does: cpu.weight as shares (2 + (weight-1)*262142/9999), cpu.max's quota
// ("max": none) and period, memory.max, memory.swap.max and memory.min
// ("max" read as 2^64-1).
func (c *HeldFiles) readCadvisorSpecV2(dir string) CadvisorSpec {
	var s CadvisorSpec
	var now time.Time
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		s.HasCPU = true // cAdvisor's, also for the root, which has no cpu.weight
	}
	if w, err := c.ReadUint(filepath.Join(dir, "cpu.weight"), now); err == nil && w >= 1 && w <= 10000 {
		s.HasCPU, s.Shares = true, WeightToCPUShares(w)
	}
	_ = c.ReadFile(filepath.Join(dir, "cpu.max"), now, func(b []byte) error {
		quota, period, ok := bytes.Cut(bytes.TrimSpace(b), []byte{' '})
		if !ok {
			return nil
		}
		s.HasCPU = true
		if string(quota) != "max" {
			s.Quota = atou(quota)
		}
		s.Period = atou(period)
		return nil
	})
	readMax := func(name string) (uint64, bool) {
		var v uint64
		ok := false
		_ = c.ReadFile(filepath.Join(dir, name), now, func(b []byte) error {
			b = bytes.TrimSpace(b)
			if string(b) == "max" {
				v, ok = math.MaxUint64, true
				return nil
			}
			n, err := parseUintBytes(b)
			v, ok = n, err == nil
			return nil
		})
		return v, ok
	}
	if limit, ok := readMax("memory.max"); ok {
		s.HasMemory, s.Limit = true, limit
		s.SwapLimit, _ = readMax("memory.swap.max")
		s.Reservation, _ = readMax("memory.min")
	}
	return s
}
