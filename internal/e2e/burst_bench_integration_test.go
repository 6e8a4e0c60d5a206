//go:build linux

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// Defaults and fixed parameters of BenchmarkBurst.
const (
	burstDefaultPods   = 30
	burstDefaultRounds = 1
	burstDefaultIdle   = 60 * time.Second
	// burstSettle is the wait between the last pod running and the idle
	// window, so that the start-up work (status updates, PLEG relists of
	// the new containers) has settled.
	burstSettle = 10 * time.Second
	// burstGrace is the pods' terminationGracePeriodSeconds: busybox's sleep
	// as PID 1 ignores SIGTERM, so a removal takes at least this long.
	burstGrace = 2
	// burstFloorLabel marks the floor run's containers with the id of its
	// node fixture: they are removed by ID, and by this label as a backstop.
	burstFloorLabel = "io.kubelet-dockershim.e2e-burst-floor"

	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelContainerName = "io.kubernetes.container.name"
)

// burstConfig is one benchmark's parameters, from the environment.
type burstConfig struct {
	pods, rounds int
	idle         time.Duration
	// verbosity is the kubelet's -v: the kubelet's default (0) unless
	// BURST_V says otherwise; the test harness's -v=4 logs every relist and
	// sync and costs idle CPU that a node does not pay.
	verbosity string
	// profileDir, when set (BURST_PROFILE_DIR), gets each round's CPU profile of the kubelet over the burst's first 20 s, its CPU
	// profile over the idle window and its heap profile at the end of the idle window.
	profileDir string
}

func burstConfigFromEnv(b *testing.B) burstConfig {
	b.Helper()
	cfg := burstConfig{pods: burstDefaultPods, rounds: burstDefaultRounds, idle: burstDefaultIdle}
	for _, e := range []struct {
		name string
		dst  *int
	}{{"BURST_PODS", &cfg.pods}, {"BURST_ROUNDS", &cfg.rounds}} {
		if v := os.Getenv(e.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				b.Fatalf("%s=%q: want a positive integer", e.name, v)
			}
			*e.dst = n
		}
	}
	cfg.verbosity = "0"
	if v := os.Getenv("BURST_V"); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 0 {
			b.Fatalf("BURST_V=%q: want a log verbosity (0, 2, 4...)", v)
		}
		cfg.verbosity = v
	}
	cfg.profileDir = os.Getenv("BURST_PROFILE_DIR")
	if v := os.Getenv("BURST_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("BURST_IDLE=%q: want a positive Go duration such as 20s", v)
		}
		cfg.idle = d
	}
	return cfg
}

// startTimeout bounds the wait for every pod (pair) of a run to start.
func (c burstConfig) startTimeout() time.Duration {
	return 2*time.Minute + time.Duration(c.pods)*2*time.Second
}

// burstRound is what one round measured.
type burstRound struct {
	kubelet, floor startLatencies
	idleCPU        float64 // kubelet process, % of one core over the idle window
	// CPU seconds spent while the pods started (manifests written -> every
	// pod's container started; launch -> every pair started for the floor):
	// by the kubelet process, and by the private dockerd with its containerd.
	kubeletBurstCPU, dockerBurstCPU, floorDockerCPU float64
	rssMiB                                          float64 // kubelet process, at the end of the idle window
	appStopped                                      time.Duration
	removal                                         time.Duration // manifests removed -> no container of the pods running
	floorCleanup                                    time.Duration // CNI DEL and forced removal of the floor's pairs
}

// startLatencies are per-pod start latencies in seconds, sorted.
type startLatencies []float64

func (l startLatencies) q(p float64) float64 { return percentile(l, p) }
func (l startLatencies) max() float64        { return l[len(l)-1] }

// BenchmarkBurst is the burst benchmark of issue 15: N static pods (busybox
// `sleep 3600`, IfNotPresent, grace 2 s) written at once into the manifest dir
// of a running node, against the Docker floor, the same N pause+busybox pairs
// started directly through Docker's API with the same CNI ADD (see
// runBurstFloor). One round is one kubelet run and one floor run, each on a
// fresh node fixture (its own CNI bridge, subnet, conflist and libcni cache;
// the floor run starts no kubelet); rounds alternate which goes first.
//
// The kubelet run measures, per pod, its app container's Docker StartedAt
// minus its manifest's write time (p50/p90/p99/max); after a settle, the
// kubelet process's CPU (% of one core, from /proc) and RSS over an idle
// window (in docker mode that process is the kubelet and the dockershim
// together); then, with every manifest removed at once, the time until Docker
// runs none of the pods' containers. The floor run measures each pair's
// busybox StartedAt minus the launch time. Figures are reported as medians
// over rounds, the ratios as kubelet median / floor median.
//
// Env: BURST_PODS pods (pairs) per run, default 30; BURST_ROUNDS interleaved
// rounds, default 1 (compare medians of 3 or more: single runs vary by about
// +-12 % on 2 cores); BURST_IDLE the idle window (a Go duration), default
// 60s. Run it once (-v shows every round's table; go test keeps only 10 lines
// of a benchmark's log without it):
//
//	BENCH=Burst BURST_PODS=100 BURST_ROUNDS=3 PKGS=./internal/e2e ./scripts/bench.sh -v
func BenchmarkBurst(b *testing.B) {
	cfg := burstConfigFromEnv(b)
	dc := burstDockerClient(b)
	for i := 0; i < b.N; i++ {
		rounds := make([]burstRound, 0, cfg.rounds)
		for r := 0; r < cfg.rounds; r++ {
			var round burstRound
			if r%2 == 0 {
				runBurstKubelet(b, dc, cfg, &round)
				runBurstFloor(b, dc, cfg, &round)
			} else {
				runBurstFloor(b, dc, cfg, &round)
				runBurstKubelet(b, dc, cfg, &round)
			}
			rounds = append(rounds, round)
			b.Logf("round %d/%d, %d pods:\n%s", r+1, cfg.rounds, cfg.pods, round.table(cfg.idle, cfg.verbosity))
		}
		reportBurst(b, cfg, rounds)
	}
}

// burstDockerClient is a client of the suite's private dockerd.
func burstDockerClient(b *testing.B) *libdocker.Client {
	b.Helper()
	s := requireSuite(b)
	dc, err := libdocker.New(libdocker.Options{Endpoint: s.docker})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = dc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dc.Ping(ctx); err != nil {
		b.Fatal(err)
	}
	return dc
}

// burstManifest is a static pod of one busybox container that sleeps.
func burstManifest(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: @NS@
spec:
  terminationGracePeriodSeconds: %d
  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
`, name, burstGrace)
}

// runBurstKubelet is the kubelet run of a round: a fresh node, the manifests
// written at once, the start latencies from Docker, a settle, the idle window,
// then every manifest removed at once and the time until Docker has none of
// the pods' containers running. The node is cleaned up before it returns.
func runBurstKubelet(b *testing.B, dc *libdocker.Client, cfg burstConfig, round *burstRound) {
	b.Helper()
	n := newNode(b)
	defer n.cleanup()
	n.extra = append(n.extra, "-v="+cfg.verbosity)
	if cfg.profileDir != "" {
		// The profile is read from the API port, open to anyone for this run.
		n.extra = append(n.extra, "--anonymous-auth=true", "--authorization-mode=AlwaysAllow")
	}
	n.start()

	files := make([]string, 0, cfg.pods)
	written := make(map[string]time.Time, cfg.pods)
	var profiled sync.WaitGroup
	if cfg.profileDir != "" {
		// The CPU profile covers the burst's first 20 seconds.
		path := filepath.Join(cfg.profileDir, fmt.Sprintf("cpu-burst-%dpods-%s.pb.gz", cfg.pods, time.Now().Format("150405")))
		profiled.Go(func() { n.saveProfile("profile?seconds=20", path) })
	}
	kubelet0, docker0 := cpuTicks(b, n.kubelet.pid()), dockerCPUTicks(b)
	for p := 0; p < cfg.pods; p++ {
		name := fmt.Sprintf("burst%03d", p)
		n.writeManifest(name+".yaml", burstManifest(name))
		written[n.podName(name)] = time.Now()
		files = append(files, name+".yaml")
	}
	round.kubelet = n.waitBurstStarted(dc, written, cfg.startTimeout())
	round.kubeletBurstCPU = float64(cpuTicks(b, n.kubelet.pid())-kubelet0) / clkTck
	round.dockerBurstCPU = float64(dockerCPUTicks(b)-docker0) / clkTck
	profiled.Wait()

	time.Sleep(burstSettle)
	var idleProf sync.WaitGroup
	if cfg.profileDir != "" {
		// The idle CPU profile covers the idle window but its last 5 s.
		path := filepath.Join(cfg.profileDir, fmt.Sprintf("cpu-idle-%dpods-%s.pb.gz", cfg.pods, time.Now().Format("150405")))
		secs := max(1, int((cfg.idle-5*time.Second)/time.Second))
		idleProf.Go(func() { n.saveProfile(fmt.Sprintf("profile?seconds=%d", secs), path) })
	}
	round.idleCPU, round.rssMiB = idleUsage(b, n.kubelet.pid(), cfg.idle)
	idleProf.Wait()
	if cfg.profileDir != "" {
		n.saveProfile("heap", filepath.Join(cfg.profileDir, fmt.Sprintf("heap-%dpods-%s.pb.gz", cfg.pods, time.Now().Format("150405"))))
	}

	removed := time.Now()
	for _, f := range files {
		n.removeManifest(f)
	}
	round.appStopped, round.removal = n.waitBurstStopped(dc, removed, 2*time.Minute)
}

// dockerCPUTicks is the CPU (utime+stime, clock ticks) of the suite's
// private dockerd and of its containerd.
func dockerCPUTicks(b *testing.B) int64 {
	b.Helper()
	d := requireSuite(b).dockrd.pid()
	total := cpuTicks(b, d)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		st := string(data)
		open, end := strings.IndexByte(st, '('), strings.LastIndexByte(st, ')')
		if open < 0 || end < 0 || end+2 >= len(st) || st[open+1:end] != "containerd" {
			continue
		}
		if f := strings.Fields(st[end+2:]); len(f) > 1 && f[1] == strconv.Itoa(d) {
			pid, _ := strconv.Atoi(e.Name())
			total += cpuTicks(b, pid)
		}
	}
	return total
}

// saveProfile writes the kubelet's profile /debug/pprof/<which> (on the API
// port, which the run opened to anonymous clients) to path.
func (n *node) saveProfile(which, path string) {
	n.t.Helper()
	c := http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the test's own kubelet on 127.0.0.1
	}}
	resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d/debug/pprof/%s", n.apiPort, which))
	if err != nil {
		n.t.Errorf("%s profile: %v", which, err)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		n.t.Errorf("%s profile: code %d: %v %.200s", which, resp.StatusCode, err, body)
		return
	}
	if err := os.WriteFile(path, body, 0o644); err != nil {
		n.t.Error(err)
		return
	}
	n.t.Logf("%s profile: %s", which, path)
}

// burstList lists the private dockerd's containers that carry every label
// (k=v), running ones only unless all.
func burstList(dc *libdocker.Client, all bool, labels ...string) ([]libdocker.ContainerSummary, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pairs := make([]libdocker.FilterKeyValuePair, 0, len(labels))
	for _, l := range labels {
		pairs = append(pairs, libdocker.FilterArg("label", l))
	}
	return dc.ListContainers(ctx, libdocker.ListOptions{All: all, Filters: libdocker.NewFilterArgs(pairs...)})
}

// startedAt is a container's State.StartedAt as Docker reports it.
func startedAt(dc *libdocker.Client, id string) (time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := dc.InspectContainer(ctx, id)
	if err != nil {
		return time.Time{}, err
	}
	if j.ContainerJSONBase == nil || j.State == nil {
		return time.Time{}, fmt.Errorf("container %s: inspect has no state", id)
	}
	at, err := time.Parse(time.RFC3339Nano, j.State.StartedAt)
	if err != nil || at.Year() < 2000 {
		return time.Time{}, fmt.Errorf("container %s: StartedAt %q: not started (%v)", id, j.State.StartedAt, err)
	}
	return at, nil
}

// waitBurstStarted polls Docker until the app container of every pod of
// written (pod name -> manifest write time) has run, and returns each pod's
// latency: its container's StartedAt minus its manifest's write time. The poll
// interval only delays the wait, not the figures (StartedAt is Docker's).
func (n *node) waitBurstStarted(dc *libdocker.Client, written map[string]time.Time, timeout time.Duration) startLatencies {
	n.t.Helper()
	started := make(map[string]time.Time, len(written))
	deadline := time.Now().Add(timeout)
	for len(started) < len(written) {
		if n.kubelet.exited() {
			n.t.Fatalf("kubelet exited (%v) with %d of %d app containers started", n.kubelet.err, len(started), len(written))
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("%d of %d app containers started within %s", len(started), len(written), timeout)
		}
		list, err := burstList(dc, true, labelPodNamespace+"="+n.ns, labelContainerName+"=app")
		if err != nil {
			n.t.Fatal(err)
		}
		for _, c := range list {
			pod := c.Labels[labelPodName]
			if _, ok := written[pod]; !ok || !started[pod].IsZero() {
				continue
			}
			if at, err := startedAt(dc, c.ID); err == nil {
				started[pod] = at
			}
		}
		time.Sleep(time.Second)
	}
	lat := make(startLatencies, 0, len(started))
	for pod, at := range started {
		lat = append(lat, at.Sub(written[pod]).Seconds())
	}
	sort.Float64s(lat)
	return lat
}

// waitBurstStopped polls Docker (every 100 ms) from removed until no app
// container, then no container at all (sandboxes too), of the node's pods
// runs, and returns both delays.
func (n *node) waitBurstStopped(dc *libdocker.Client, removed time.Time, timeout time.Duration) (appStopped, allStopped time.Duration) {
	n.t.Helper()
	deadline := removed.Add(timeout)
	for {
		list, err := burstList(dc, false, labelPodNamespace+"="+n.ns)
		if err != nil {
			n.t.Fatal(err)
		}
		now := time.Now()
		apps := 0
		for _, c := range list {
			if c.Labels[labelContainerName] == "app" {
				apps++
			}
		}
		if apps == 0 && appStopped == 0 {
			appStopped = now.Sub(removed)
		}
		if len(list) == 0 {
			return appStopped, now.Sub(removed)
		}
		if now.After(deadline) {
			n.t.Fatalf("%d containers of the removed pods (%d app) still running after %s", len(list), apps, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// table is the round's figures as a readable table.
func (r *burstRound) table(idle time.Duration, verbosity string) string {
	var sb strings.Builder
	row := func(name string, f func(q float64) string) {
		fmt.Fprintf(&sb, "  %-26s", name)
		for _, q := range []float64{0.50, 0.90, 0.99, 1} {
			fmt.Fprintf(&sb, " %8s", f(q))
		}
		sb.WriteString("\n")
	}
	fmt.Fprintf(&sb, "  %-26s %8s %8s %8s %8s\n", "start latency", "p50", "p90", "p99", "max")
	row("kubelet (StartedAt-write)", func(q float64) string { return fmt.Sprintf("%.2fs", r.kubelet.q(q)) })
	row("floor (StartedAt-launch)", func(q float64) string { return fmt.Sprintf("%.2fs", r.floor.q(q)) })
	row("ratio kubelet/floor", func(q float64) string { return fmt.Sprintf("%.2fx", r.kubelet.q(q)/r.floor.q(q)) })
	fmt.Fprintf(&sb, "  cpu while starting: kubelet %.1fs, dockerd+containerd %.1fs; floor: dockerd+containerd %.1fs\n",
		r.kubeletBurstCPU, r.dockerBurstCPU, r.floorDockerCPU)
	fmt.Fprintf(&sb, "  kubelet idle (%s window, -v=%s): cpu %.2f %% of one core, rss %.1f MiB\n", idle, verbosity, r.idleCPU, r.rssMiB)
	fmt.Fprintf(&sb, "  removal: app containers stopped after %.2fs, all (sandboxes too) after %.2fs; floor clean-up %.2fs",
		r.appStopped.Seconds(), r.removal.Seconds(), r.floorCleanup.Seconds())
	return sb.String()
}

// reportBurst reports the medians over rounds (ratios are of the medians).
func reportBurst(b *testing.B, cfg burstConfig, rounds []burstRound) {
	b.Helper()
	med := func(f func(r *burstRound) float64) float64 {
		v := make([]float64, len(rounds))
		for i := range rounds {
			v[i] = f(&rounds[i])
		}
		sort.Float64s(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	k50 := med(func(r *burstRound) float64 { return r.kubelet.q(0.50) })
	k90 := med(func(r *burstRound) float64 { return r.kubelet.q(0.90) })
	k99 := med(func(r *burstRound) float64 { return r.kubelet.q(0.99) })
	kmax := med(func(r *burstRound) float64 { return r.kubelet.max() })
	f50 := med(func(r *burstRound) float64 { return r.floor.q(0.50) })
	f99 := med(func(r *burstRound) float64 { return r.floor.q(0.99) })
	fmax := med(func(r *burstRound) float64 { return r.floor.max() })
	cpu := med(func(r *burstRound) float64 { return r.idleCPU })
	rss := med(func(r *burstRound) float64 { return r.rssMiB })
	removal := med(func(r *burstRound) float64 { return r.removal.Seconds() })

	for _, m := range []struct {
		v    float64
		unit string
	}{
		{k50, "p50-s"}, {k90, "p90-s"}, {k99, "p99-s"}, {kmax, "max-s"},
		{f50, "floor-p50-s"}, {f99, "floor-p99-s"}, {fmax, "floor-max-s"},
		{k50 / f50, "p50/floor-p50"}, {k99 / f99, "p99/floor-p99"},
		{cpu, "idle-cpu-%"}, {rss, "rss-MiB"}, {removal, "removal-s"},
	} {
		b.ReportMetric(m.v, m.unit)
	}
	b.Logf("medians over %d round(s), %d pods: kubelet p50 %.2fs p90 %.2fs p99 %.2fs max %.2fs | "+
		"floor p50 %.2fs p99 %.2fs max %.2fs | ratio p50 %.2fx p99 %.2fx | idle cpu %.2f %% rss %.1f MiB | removal %.2fs",
		len(rounds), cfg.pods, k50, k90, k99, kmax, f50, f99, fmax, k50/f50, k99/f99, cpu, rss, removal)
}
