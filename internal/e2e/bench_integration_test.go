//go:build linux

package e2e

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// BenchmarkStaticPodBurst30 writes 30 static pod manifests at once and measures, per
// pod, the time from its manifest being written to all its containers running (as
// /pods reports it), then the kubelet process's CPU and RSS while it idles with the 30
// pods. In docker mode that process is the kubelet and the dockershim together.
// Run: go test ./internal/e2e -run '^$' -bench StaticPodBurst30 -benchtime 1x
func BenchmarkStaticPodBurst30(b *testing.B) {
	for i := 0; i < b.N; i++ {
		n := newNode(b)
		n.start()
		const pods = 30
		written := make(map[string]time.Time, pods)
		for p := 0; p < pods; p++ {
			name := fmt.Sprintf("burst%02d", p)
			n.writeManifest(name+".yaml", sleeperManifest(name, "1"))
			written[n.podName(name)] = time.Now()
		}
		latencies := n.waitAllRunning(written, 3*time.Minute)
		sort.Float64s(latencies)
		b.ReportMetric(percentile(latencies, 0.50), "p50-s")
		b.ReportMetric(percentile(latencies, 0.99), "p99-s")
		b.ReportMetric(latencies[len(latencies)-1], "all-running-s")

		time.Sleep(10 * time.Second) // let start-up work settle
		cpu, rss := idleUsage(b, n.kubelet.pid(), 30*time.Second)
		b.ReportMetric(cpu, "idle-cpu-%")
		b.ReportMetric(rss, "rss-MiB")
	}
}

// waitAllRunning polls /pods until every pod of written has all containers running,
// and returns each pod's latency in seconds.
func (n *node) waitAllRunning(written map[string]time.Time, timeout time.Duration) []float64 {
	n.t.Helper()
	done := map[string]float64{}
	deadline := time.Now().Add(timeout)
	for len(done) < len(written) {
		if time.Now().After(deadline) {
			n.t.Fatalf("%d of %d pods running after %s", len(done), len(written), timeout)
		}
		pods, err := n.pods()
		now := time.Now()
		if err == nil {
			for i := range pods {
				p := &pods[i]
				if _, ok := done[p.Name]; ok || !allRunning(p) {
					continue
				}
				if t0, ok := written[p.Name]; ok {
					done[p.Name] = now.Sub(t0).Seconds()
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	out := make([]float64, 0, len(done))
	for _, d := range done {
		out = append(out, d)
	}
	return out
}

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
	const clkTck = 100 // USER_HZ on Linux
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
