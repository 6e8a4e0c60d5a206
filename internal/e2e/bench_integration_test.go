//go:build linux

package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Helpers of the benchmarks of this package. The static pod burst (formerly
// BenchmarkStaticPodBurst30, 30 pods timed to /pods reporting them running) is
// BenchmarkBurst in burst_bench_integration_test.go: its default of 30 pods
// timed to Docker's StartedAt, against the Docker floor.

// allRunning reports whether every container of a pod runs, as /pods reports it.
func allRunning(p *v1.Pod) bool {
	if len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
	}
	return true
}

func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

// idleUsage samples a process's CPU time over window (percent of one core) and its
// RSS at the end (MiB).
func idleUsage(b *testing.B, pid int, window time.Duration) (cpuPercent, rssMiB float64) {
	b.Helper()
	t0, c0 := time.Now(), cpuTicks(b, pid)
	time.Sleep(window)
	t1, c1 := time.Now(), cpuTicks(b, pid)
	cpuPercent = float64(c1-c0) / clkTck / t1.Sub(t0).Seconds() * 100
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			rssMiB = kb / 1024
		}
	}
	return cpuPercent, rssMiB
}

// clkTck is USER_HZ on Linux, the unit of cpuTicks.
const clkTck = 100

// cpuTicks is utime+stime of a process, in clock ticks.
func cpuTicks(b *testing.B, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return utime + stime
}
