//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Churn: pod create/delete cycles through a standalone docker-mode node, then
// checks that nothing a pod held outlives it. One cycle is one static pod
// written, seen running in /pods, its manifest removed, and then gone from
// /pods and from Docker; churnInFlight cycles run at once.
const (
	churnInFlight = 30
	// churnConverge bounds the wait, after the last cycle, for the kubelet's
	// and the shim's clean-up to reach the idle baseline.
	churnConverge = 60 * time.Second
	// Process growth allowed over the idle baseline after convergence.
	churnGoroutineSlack = 25
	churnFDSlack        = 10
	// Every churnHostPortEvery-th pod forwards a host port (portmap), so the
	// iptables check sees per-sandbox DNAT chains, not only ipMasq's.
	churnHostPortEvery = 5
)

// TestIntegrationChurnNoLeaks runs 100 churn cycles (30 in flight) and checks for leaks:
// containers and sandboxes, checkpoints, IPs, libcni cache entries, iptables
// rules, pod log and pod directories, netns mounts, kubelet goroutines and fds.
// BenchmarkChurn runs the same with more cycles.
func TestIntegrationChurnNoLeaks(t *testing.T) {
	r := runChurn(t, 100, 4*time.Minute)
	r.log(t)
}

// BenchmarkChurn is the long churn. Cycles per run come from CHURN_CYCLES
// (default 1000); run it once:
//
//	BENCH=Churn CHURN_CYCLES=1000 PKGS=./internal/e2e ./scripts/bench.sh
func BenchmarkChurn(b *testing.B) {
	cycles := 1000
	if v := os.Getenv("CHURN_CYCLES"); v != "" {
		c, err := strconv.Atoi(v)
		if err != nil || c <= 0 {
			b.Fatalf("CHURN_CYCLES=%q: want a positive integer", v)
		}
		cycles = c
	}
	// Budget: about 1.5 s per cycle of a 2-core machine, plus set-up.
	budget := 3*time.Minute + time.Duration(cycles)*1500*time.Millisecond
	for i := 0; i < b.N; i++ {
		r := runChurn(b, cycles, budget)
		r.log(b)
		b.ReportMetric(r.churn.Seconds(), "churn-s")
		b.ReportMetric(float64(cycles)/r.churn.Seconds(), "cycles/s")
		b.ReportMetric(r.startP50, "start-p50-s")
		b.ReportMetric(r.startP99, "start-p99-s")
		// Deltas leave out the local-socket connections (see churnSample).
		b.ReportMetric(float64((r.after.goroutines-r.after.localConns)-(r.before.goroutines-r.before.localConns)), "goroutines-delta")
		b.ReportMetric(float64((r.after.fds-r.after.localConns)-(r.before.fds-r.before.localConns)), "fds-delta")
		b.ReportMetric(float64(r.after.localConns), "local-conns-after")
		b.ReportMetric(r.after.rssMiB, "rss-after-MiB")
	}
}

// churnResult is what one churn run measured.
type churnResult struct {
	cycles             int
	before, peak       churnSample // idle baseline after warm-up; largest counts seen mid-churn
	after              churnSample // once converged (or at the convergence deadline)
	churn, converge    time.Duration
	total              time.Duration
	startP50, startP99 float64 // manifest written -> all containers running, seconds
	goneP50, goneP99   float64 // manifest removed -> gone from /pods and Docker, seconds
}

func (r *churnResult) log(tb testing.TB) {
	tb.Logf("churn: %d cycles (%d in flight) in %s (%.2f cycles/s); converged in %s; total %s",
		r.cycles, churnInFlight, r.churn.Round(time.Millisecond), float64(r.cycles)/r.churn.Seconds(),
		r.converge.Round(time.Millisecond), r.total.Round(time.Second))
	tb.Logf("churn: start latency p50 %.2fs p99 %.2fs; removal latency p50 %.2fs p99 %.2fs", r.startP50, r.startP99, r.goneP50, r.goneP99)
	tb.Logf("churn: before %s", r.before)
	tb.Logf("churn: peak   %s", r.peak)
	tb.Logf("churn: after  %s", r.after)
}

// runChurn starts a node, warms it up, takes the idle baseline, runs cycles
// and checks for leaks once every pod is gone. The whole run must fit budget.
func runChurn(tb testing.TB, cycles int, budget time.Duration) *churnResult {
	tb.Helper()
	start := time.Now()
	n := newNode(tb)
	n.writeChurnCNIConf()
	cleanupHostportChains(tb)
	ids := watchCreated(tb, n)
	n.start()
	c := &churner{n: n, ids: ids, hostPortBase: 20000 + int(time.Now().UnixNano()%20000)}

	c.warmUp()
	res := &churnResult{cycles: cycles}
	res.before = c.waitIdle(churnConverge, nil)
	if bad := res.before.leaks(); len(bad) > 0 {
		tb.Fatalf("not idle after the warm-up: %s (%s)", strings.Join(bad, ", "), res.before)
	}
	tb.Logf("churn: idle baseline after the warm-up (%s): %s", time.Since(start).Round(time.Millisecond), res.before)

	t0 := time.Now()
	deadline := start.Add(budget - churnConverge)
	starts, gones := c.run(cycles, deadline)
	res.churn = time.Since(t0)
	res.peak = c.peak
	res.startP50, res.startP99 = percentiles(starts)
	res.goneP50, res.goneP99 = percentiles(gones)

	t1 := time.Now()
	res.after = c.waitIdle(churnConverge, &res.before)
	res.converge = time.Since(t1)
	res.total = time.Since(start)
	for _, bad := range res.after.leaks() {
		tb.Errorf("leak after %d cycles and %s of convergence: %s", cycles, churnConverge, bad)
	}
	if grew := res.after.grewFrom(res.before); len(grew) > 0 {
		for _, bad := range grew {
			tb.Errorf("kubelet process grew after %d cycles: %s", cycles, bad)
		}
		tb.Logf("churn: open fds of the kubelet by kind:%s", fdSummary(n.kubelet.pid()))
		tb.Logf("churn: goroutines of the kubelet by first non-runtime frame (SIGQUIT dump):%s", goroutineSummary(n))
	}
	if res.total > budget {
		tb.Errorf("churn run took %s, over its budget of %s", res.total.Round(time.Second), budget)
	}
	return res
}

// writeChurnCNIConf replaces the node's network with bridge (ipMasq, so each
// pod gets nat rules) + host-local + portmap. Same name, subnet and IPAM dir.
func (n *node) writeChurnCNIConf() {
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":%q,"plugins":[{"type":"bridge","bridge":%q,"isGateway":true,"ipMasq":true,
  "ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"%s.0/24"}]]}},{"type":"portmap","capabilities":{"portMappings":true}}]}`,
		cniNetwork, n.bridge, n.ipamDir, n.subnet)
	if err := os.WriteFile(filepath.Join(n.cniConf, "10-e2e.conflist"), []byte(conf), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

// churnManifest is a one-container pod that exits at once on SIGTERM (a
// plain sleep as PID 1 ignores it and waits out the grace period);
// hostPort > 0 forwards that host port to the pod's port 8080.
func churnManifest(name string, hostPort int) string {
	spec := `  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
`
	if hostPort > 0 {
		spec += fmt.Sprintf("    ports:\n    - {containerPort: 8080, hostPort: %d}\n", hostPort)
	}
	return manifest(name, spec)
}

// churner drives the cycles of one node.
type churner struct {
	n            *node
	ids          *idSet
	hostPortBase int
	peak         churnSample
}

// warmUp creates and removes a few pods (one with a host port), so caches,
// connections and long-lived goroutines exist before the baseline.
func (c *churner) warmUp() {
	n := c.n
	for i := 0; i < 3; i++ {
		hp := 0
		if i == 0 {
			hp = c.hostPortBase - 1
		}
		name := fmt.Sprintf("warm%d", i)
		n.writeManifest(name+".yaml", churnManifest(name, hp))
	}
	for i := 0; i < 3; i++ {
		n.waitPod(fmt.Sprintf("warm%d", i), 2*time.Minute, "running", allRunning)
	}
	for i := 0; i < 3; i++ {
		n.removeManifest(fmt.Sprintf("warm%d.yaml", i))
	}
	for i := 0; i < 3; i++ {
		n.waitNoPod(fmt.Sprintf("warm%d", i), time.Minute)
	}
}

// churnPod is one cycle in flight.
type churnPod struct {
	file             string
	written, removed time.Time
}

// run keeps up to churnInFlight cycles going until cycles are done, and
// returns each cycle's start and removal latency in seconds.
func (c *churner) run(cycles int, deadline time.Time) (starts, gones []float64) {
	n := c.n
	n.t.Helper()
	inFlight := map[string]*churnPod{} // by pod name
	next, done, polls := 0, 0, 0
	for done < cycles {
		for len(inFlight) < churnInFlight && next < cycles {
			name := fmt.Sprintf("churn%05d", next)
			hp := 0
			if next%churnHostPortEvery == 0 {
				hp = c.hostPortBase + next
			}
			n.writeManifest(name+".yaml", churnManifest(name, hp))
			inFlight[n.podName(name)] = &churnPod{file: name + ".yaml", written: time.Now()}
			next++
		}
		listed, inDocker, seen := c.observe()
		now := time.Now()
		for full, p := range inFlight {
			if !seen {
				break
			}
			pod, ok := listed[full]
			switch {
			case p.removed.IsZero() && ok && pod.Status.Phase == v1.PodFailed:
				n.t.Fatalf("pod %s failed: %s: %s", full, pod.Status.Reason, pod.Status.Message)
			case p.removed.IsZero() && ok && allRunning(pod):
				starts = append(starts, now.Sub(p.written).Seconds())
				n.removeManifest(p.file)
				p.removed = time.Now()
			case !p.removed.IsZero() && !ok && !inDocker[full]:
				gones = append(gones, now.Sub(p.removed).Seconds())
				delete(inFlight, full)
				done++
			}
		}
		if polls++; polls%25 == 0 {
			c.notePeak()
		}
		if n.kubelet.exited() {
			n.t.Fatalf("kubelet exited (%v) after %d of %d cycles", n.kubelet.err, done, cycles)
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("churn: %d of %d cycles done before the deadline; in flight: %s", done, cycles, describeInFlight(inFlight))
		}
		time.Sleep(250 * time.Millisecond)
	}
	return starts, gones
}

// observe returns the pods /pods lists, by name, and the names of the pods
// that still have a container or sandbox (any state) in Docker; ok is false
// when /pods did not answer (then nothing may be counted as gone).
func (c *churner) observe() (listed map[string]*v1.Pod, inDocker map[string]bool, ok bool) {
	n := c.n
	pods, err := n.pods()
	if err != nil {
		n.t.Logf("churn: /pods: %v", err)
		return nil, nil, false
	}
	listed = make(map[string]*v1.Pod, len(pods))
	for i := range pods {
		listed[pods[i].Name] = &pods[i]
	}
	out, err := n.s.dockerCLI(context.Background(), "ps", "-a", "--filter", "label=io.kubernetes.pod.namespace="+n.ns,
		"--format", `{{.Label "io.kubernetes.pod.name"}}`)
	if err != nil {
		n.t.Fatalf("docker ps: %v: %s", err, out)
	}
	inDocker = map[string]bool{}
	for _, name := range strings.Fields(out) {
		inDocker[name] = true
	}
	return listed, inDocker, true
}

func describeInFlight(m map[string]*churnPod) string {
	var parts []string
	for name, p := range m {
		state := "waiting to run since " + time.Since(p.written).Round(time.Second).String()
		if !p.removed.IsZero() {
			state = "removed " + time.Since(p.removed).Round(time.Second).String() + " ago"
		}
		parts = append(parts, name+": "+state)
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// notePeak keeps, per counter, the largest value seen during the churn (to
// show that each check sees the resource it counts).
func (c *churner) notePeak() {
	s := c.sample()
	p := &c.peak
	p.containers = max(p.containers, s.containers)
	p.checkpoints = max(p.checkpoints, s.checkpoints)
	p.ips = max(p.ips, s.ips)
	p.cniCache = max(p.cniCache, s.cniCache)
	p.iptables = max(p.iptables, s.iptables)
	p.podLogDirs = max(p.podLogDirs, s.podLogDirs)
	p.podDirs = max(p.podDirs, s.podDirs)
	p.netns = max(p.netns, s.netns)
	p.goroutines = max(p.goroutines, s.goroutines)
	p.fds = max(p.fds, s.fds)
	p.threads = max(p.threads, s.threads)
	p.rssMiB = max(p.rssMiB, s.rssMiB)
	p.localConns = max(p.localConns, s.localConns)
}

// waitIdle polls, up to timeout, until no pod resource is left and (with a
// baseline) the kubelet process is back within the slack of it; it returns
// the last sample either way.
func (c *churner) waitIdle(timeout time.Duration, base *churnSample) churnSample {
	deadline := time.Now().Add(timeout)
	for {
		s := c.sample()
		idle := len(s.leaks()) == 0 && (base == nil || len(s.grewFrom(*base)) == 0)
		if idle || time.Now().After(deadline) {
			if base == nil && idle {
				// Let the last teardown's goroutines finish, then read the
				// process figures again for the baseline.
				time.Sleep(3 * time.Second)
				s = c.sample()
			}
			return s
		}
		time.Sleep(time.Second)
	}
}
