package utilchains

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// netnsEnv marks the test binary run in a network namespace of its own.
const netnsEnv = "UTILCHAINS_TEST_NETNS"

// TestUtilChains: upstream's chains and rules for IPv4 and the hint chain
// for IPv6, once each after a second start; a flush of every table brings
// them back at the next canary check. The test binary runs itself again in
// a new network namespace for it (a child process: all its threads, the
// canary loops' included, are in it), so that the host's iptables are never
// touched.
func TestUtilChains(t *testing.T) {
	if os.Getenv(netnsEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestUtilChains$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), netnsEnv+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestUtilChains") {
			t.Fatalf("in a new network namespace: %v\n%s", err, out)
		}
		t.Logf("%s", out)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := New(Options{Logger: zaptest.NewLogger(t), Interval: 200 * time.Millisecond})
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// A second kubelet start (a restart) adds nothing.
	m2 := New(Options{Logger: zaptest.NewLogger(t), Interval: time.Hour})
	if err := m2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	wantV4 := map[string][]string{
		"mangle": {"-N KUBE-IPTABLES-HINT", "-N KUBE-KUBELET-CANARY"},
		"nat":    {"-N KUBE-KUBELET-CANARY"},
		"filter": {
			"-N KUBE-FIREWALL", "-N KUBE-KUBELET-CANARY",
			"-A INPUT -j KUBE-FIREWALL", "-A OUTPUT -j KUBE-FIREWALL",
			`-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP`,
		},
	}
	wantV6 := map[string][]string{
		"mangle": {"-N KUBE-IPTABLES-HINT", "-N KUBE-KUBELET-CANARY"},
		"nat":    {"-N KUBE-KUBELET-CANARY"},
		"filter": {"-N KUBE-KUBELET-CANARY"},
	}
	check := func(what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			got4, got6 := rules(t, "iptables"), rules(t, "ip6tables")
			if equalRules(got4, wantV4) && equalRules(got6, wantV6) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: IPv4 rules %q, want %q; IPv6 rules %q, want %q", what, got4, wantV4, got6, wantV6)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	check("after two starts")

	// A firewall reload flushes everything: the chains come back.
	for _, cmd := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"mangle", "nat", "filter"} {
			for _, op := range []string{"-F", "-X"} {
				if out, err := exec.Command(cmd, "-t", table, op).CombinedOutput(); err != nil {
					t.Fatalf("%s -t %s %s: %v %s", cmd, table, op, err, out)
				}
			}
		}
	}
	// (The running managers may restore the chains at any moment from here:
	// an empty table cannot be asserted.)
	check("after a flush")
	cancel()
	m.Wait()
	m2.Wait()
}

// rules lists, per table, the chains made (-N) and rules (-A) of cmd's
// iptables-save, without the built-in chains' policies.
func rules(t *testing.T, cmd string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, table := range []string{"mangle", "nat", "filter"} {
		b, err := exec.Command(cmd, "-t", table, "-S").Output()
		if err != nil {
			t.Fatalf("%s -t %s -S: %v", cmd, table, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if strings.HasPrefix(line, "-N ") || strings.HasPrefix(line, "-A ") {
				out[table] = append(out[table], line)
			}
		}
		slices.Sort(out[table])
	}
	return out
}

func equalRules(got, want map[string][]string) bool {
	for _, table := range []string{"mangle", "nat", "filter"} {
		w := slices.Clone(want[table])
		slices.Sort(w)
		if !slices.Equal(got[table], w) {
			return false
		}
	}
	return true
}
