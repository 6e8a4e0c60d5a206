//go:build linux

package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// churnSample counts what pods leave behind on the node, and the kubelet
// process's size. Every count but netns, goroutines, fds, threads and rss
// must be 0 once the node is idle.
type churnSample struct {
	containers  int // Docker containers and sandboxes of the test's namespace (any state)
	checkpoints int // files in <shim root>/sandbox
	ips         int // host-local reservations in the node's IPAM dir
	cniCache    int // libcni cached results in the node's cache dir
	iptables    int // iptables rules naming the node's subnet or one of its sandboxes
	podLogDirs  int // directories in podLogsDir
	podDirs     int // directories in <root-dir>/pods
	netns       int // netns mounts of the suite's dockerd (<exec-root>/netns)
	pins        int // network namespaces the shim pins (files in <shim root>/netns)
	goroutines  int // go_goroutines of the kubelet (with its shim)
	fds         int // entries of /proc/<kubelet>/fd
	threads     int // Threads of /proc/<kubelet>/status
	rssMiB      float64
	// localConns are the open connections to the kubelet's local socket,
	// each an fd and a goroutine of the kubelet. node.get opens one per
	// call and never closes it, and the local server has no idle timeout,
	// so they count the test's own polls: grewFrom leaves them out.
	localConns int
}

func (s churnSample) String() string {
	return fmt.Sprintf("containers=%d checkpoints=%d ips=%d cni-cache=%d iptables=%d pod-log-dirs=%d pod-dirs=%d netns=%d pins=%d goroutines=%d fds=%d (local-socket conns %d: goroutines-conns=%d fds-conns=%d) threads=%d rss=%.1fMiB",
		s.containers, s.checkpoints, s.ips, s.cniCache, s.iptables, s.podLogDirs, s.podDirs, s.netns, s.pins, s.goroutines, s.fds,
		s.localConns, s.goroutines-s.localConns, s.fds-s.localConns, s.threads, s.rssMiB)
}

// leaks names each per-pod resource still present.
func (s churnSample) leaks() []string {
	var out []string
	for _, c := range []struct {
		what string
		n    int
	}{
		{"containers/sandboxes in Docker", s.containers}, {"sandbox checkpoints", s.checkpoints},
		{"host-local IPs", s.ips}, {"libcni cache entries", s.cniCache}, {"iptables rules", s.iptables},
		{"pod log directories", s.podLogDirs}, {"pod directories", s.podDirs},
		{"pinned network namespaces", s.pins},
	} {
		if c.n != 0 {
			out = append(out, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	return out
}

// grewFrom names what exceeds the baseline by more than its slack.
func (s churnSample) grewFrom(base churnSample) []string {
	var out []string
	if s.netns > base.netns {
		out = append(out, fmt.Sprintf("netns mounts %d > baseline %d", s.netns, base.netns))
	}
	if g, g0 := s.goroutines-s.localConns, base.goroutines-base.localConns; g > g0+churnGoroutineSlack {
		out = append(out, fmt.Sprintf("goroutines %d > baseline %d + %d (local-socket connections left out)", g, g0, churnGoroutineSlack))
	}
	if f, f0 := s.fds-s.localConns, base.fds-base.localConns; f > f0+churnFDSlack {
		out = append(out, fmt.Sprintf("open fds %d > baseline %d + %d (local-socket connections left out)", f, f0, churnFDSlack))
	}
	return out
}

// sample reads every counter once.
func (c *churner) sample() churnSample {
	n := c.n
	n.t.Helper()
	pid := n.kubelet.pid()
	s := churnSample{
		containers:  len(n.containers(true)),
		checkpoints: countEntries(filepath.Join(n.shimRoot, "sandbox")),
		ips:         len(n.reservedIPs()),
		cniCache:    countEntries(filepath.Join(n.cniCache, "results")),
		iptables:    len(c.iptablesRules()),
		podLogDirs:  countEntries(n.logsDir),
		podDirs:     countEntries(filepath.Join(n.rootDir, "pods")),
		netns:       len(dockerNetnsMounts(n.s)),
		pins:        countEntries(filepath.Join(n.shimRoot, "netns")),
		fds:         countEntries(fmt.Sprintf("/proc/%d/fd", pid)),
		goroutines:  -1,
	}
	// Read after go_goroutines: that read's connection is then counted too.
	s.localConns = acceptedConns(n.localSocket())
	if g, err := n.metric("go_goroutines"); err == nil {
		s.goroutines = int(g)
	} else {
		n.t.Logf("churn: go_goroutines: %v", err)
	}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "Threads:":
			s.threads, _ = strconv.Atoi(f[1])
		case "VmRSS:":
			kb, _ := strconv.ParseFloat(f[1], 64)
			s.rssMiB = kb / 1024
		}
	}
	return s
}

// countEntries is the number of entries of dir (0 when it does not exist).
func countEntries(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	return len(entries)
}

// metric reads one unlabelled metric from the kubelet's /metrics.
func (n *node) metric(name string) (float64, error) {
	body, code, err := n.get("/metrics")
	if err != nil {
		return 0, err
	}
	if code != 200 {
		return 0, fmt.Errorf("/metrics answered %d", code)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("/metrics has no %s", name)
}

// acceptedConns counts the connected sockets bound to the unix socket path
// (the server's ends of its connections) in /proc/net/unix.
func acceptedConns(path string) int {
	data, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return 0
	}
	count := 0
	for _, line := range strings.Split(string(data), "\n") {
		// Num RefCount Protocol Flags Type St Inode Path; St 03 is connected.
		f := strings.Fields(line)
		if len(f) == 8 && f[5] == "03" && f[7] == path {
			count++
		}
	}
	return count
}

var hexID = regexp.MustCompile(`[0-9a-f]{64}`)

// iptablesRules returns the rules (filter and nat) that name the node's
// subnet or a container the test created: bridge's ipMasq chains (-s <pod
// IP>, comment with the sandbox ID) and portmap's DNAT chains.
func (c *churner) iptablesRules() []string {
	n := c.n
	var out []string
	for _, table := range []string{"nat", "filter"} {
		save, err := exec.Command("iptables-save", "-t", table).Output()
		if err != nil {
			n.t.Fatalf("iptables-save -t %s: %v", table, err)
		}
		for _, line := range strings.Split(string(save), "\n") {
			// The shim's accept rules are the subnet's, not a pod's: they
			// stay while the node lives, as its bridge does.
			if !strings.HasPrefix(line, "-A ") || strings.HasPrefix(line, "-A DOCKERSHIM-FORWARD ") {
				continue
			}
			hit := strings.Contains(line, n.subnet+".")
			for _, id := range hexID.FindAllString(line, -1) {
				hit = hit || c.ids.has(id)
			}
			if hit {
				out = append(out, line)
			}
		}
	}
	return out
}

// dockerNetnsMounts lists the network namespaces the suite's dockerd holds
// mounted under its exec-root (startDockerd: <suite dir>/d/x); the shim's
// own pins are counted apart.
func dockerNetnsMounts(s *suite) []string {
	mps, err := mountsUnder(filepath.Join(s.dir, "d", "x", "netns"))
	if err != nil {
		return nil
	}
	return mps
}

// idSet is the set of container IDs Docker reported created.
type idSet struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (s *idSet) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids[id]
}

// watchCreated follows the suite dockerd's create events for the node's
// namespace (sandboxes and containers), until the test ends.
func watchCreated(tb testing.TB, n *node) *idSet {
	tb.Helper()
	set := &idSet{ids: map[string]bool{}}
	cmd := exec.Command("docker", "-H", n.s.docker, "events", "--filter", "type=container", "--filter", "event=create",
		"--filter", "label=io.kubernetes.pod.namespace="+n.ns, "--format", "{{.ID}}")
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("docker events: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			set.mu.Lock()
			set.ids[strings.TrimSpace(sc.Text())] = true
			set.mu.Unlock()
		}
	}()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		_ = cmd.Wait()
	})
	return set
}

// hostportChains are the shared nat chains portmap creates on first use and
// never removes (DEL removes each sandbox's own chains only).
var hostportChains = []string{"CNI-HOSTPORT-DNAT", "CNI-HOSTPORT-MASQ", "CNI-HOSTPORT-SETMARK"}

// cleanupHostportChains removes portmap's shared chains at the end of the
// test if they did not exist before it and no sandbox (anyone's) uses them.
func cleanupHostportChains(tb testing.TB) {
	if exec.Command("iptables", "-t", "nat", "-S", hostportChains[0]).Run() == nil {
		return
	}
	tb.Cleanup(func() {
		out, err := exec.Command("iptables", "-t", "nat", "-S", hostportChains[0]).Output()
		if err != nil || strings.Contains(string(out), "-A "+hostportChains[0]) {
			return // gone, or still in use
		}
		for _, chain := range []string{"PREROUTING", "OUTPUT", "POSTROUTING"} {
			rules, _ := exec.Command("iptables", "-t", "nat", "-S", chain).Output()
			var jumps []int
			num := 0
			for _, line := range strings.Split(string(rules), "\n") {
				if strings.HasPrefix(line, "-A ") {
					num++
					if strings.Contains(line, "-j CNI-HOSTPORT-") {
						jumps = append(jumps, num)
					}
				}
			}
			for i := len(jumps) - 1; i >= 0; i-- { // highest first keeps the numbers valid
				if out, err := exec.Command("iptables", "-t", "nat", "-D", chain, strconv.Itoa(jumps[i])).CombinedOutput(); err != nil {
					tb.Logf("deleting rule %d of %s: %v: %s", jumps[i], chain, err, out)
				}
			}
		}
		for _, op := range []string{"-F", "-X"} {
			for _, chain := range hostportChains {
				_ = exec.Command("iptables", "-t", "nat", op, chain).Run()
			}
		}
	})
}

// percentiles returns the p50 and p99 of xs.
func percentiles(xs []float64) (p50, p99 float64) {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return percentile(s, 0.50), percentile(s, 0.99)
}

// fdSummary groups the kubelet's open fds by kind (socket, pipe, anon
// inode, or the directory of a file), largest group first.
func fdSummary(pid int) string {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err.Error()
	}
	groups := map[string]int{}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		kind := target
		switch {
		case strings.HasPrefix(target, "socket:"):
			kind = "socket"
		case strings.HasPrefix(target, "pipe:"):
			kind = "pipe"
		case strings.HasPrefix(target, "/"):
			kind = filepath.Dir(target)
		}
		groups[kind]++
	}
	return countsString(groups)
}

// goroutineSummary makes the kubelet print its goroutines (SIGQUIT: it
// exits) and groups them by their first frame outside the runtime and the
// standard library's sync and net plumbing, largest group first.
func goroutineSummary(n *node) string {
	log := n.kubelet.logPath
	_ = n.kubelet.cmd.Process.Signal(syscall.SIGQUIT)
	n.kubelet.wait(20 * time.Second)
	data, err := os.ReadFile(log)
	if err != nil {
		return err.Error()
	}
	groups := map[string]int{}
	for _, g := range strings.Split(string(data), "\n\ngoroutine ")[1:] {
		frame := "?"
		for _, line := range strings.Split(g, "\n")[1:] {
			fn := strings.TrimSpace(line)
			if fn == "" || strings.HasPrefix(line, "\t") {
				continue
			}
			if i := strings.LastIndexByte(fn, '('); i > 0 {
				fn = fn[:i]
			}
			frame = fn
			if !strings.HasPrefix(fn, "runtime.") && !strings.HasPrefix(fn, "sync.") && !strings.HasPrefix(fn, "internal/") &&
				!strings.HasPrefix(fn, "net.") && !strings.HasPrefix(fn, "io.") && !strings.HasPrefix(fn, "bufio.") &&
				!strings.HasPrefix(fn, "syscall.") && !strings.HasPrefix(fn, "os.") {
				break
			}
		}
		groups[frame]++
	}
	return countsString(groups)
}

func countsString(groups map[string]int) string {
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return groups[keys[i]] > groups[keys[j]] || groups[keys[i]] == groups[keys[j]] && keys[i] < keys[j]
	})
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %5d %s", groups[k], k)
	}
	return b.String()
}
