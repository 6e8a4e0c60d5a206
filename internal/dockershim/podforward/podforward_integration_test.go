//go:build linux

package podforward

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
)

// TestIntegrationRulesOnTheHostsIptables runs Rules against the host's real
// iptables, on a chain of the test's own (the jump to it is removed at the
// end): the rules are written once, a sync finds them (the real `-S` output
// parses, so nothing is appended twice), and a flush of the chain and of the
// jump is put back by the next sync. The subnet is from TEST-NET-2
// (198.51.100.0/24), which no host routes: the rules accept nothing real.
func TestIntegrationRulesOnTheHostsIptables(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root (iptables)")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Fatalf("iptables missing (scripts/prepare-host.sh installs it): %v", err)
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	r := newRules(Options{Logger: zaptest.NewLogger(t)}, execRunner{})
	r.chain = "DSFWD-TEST-" + hex.EncodeToString(b)
	ipt := func(args ...string) (string, error) {
		out, err := exec.Command("iptables", append([]string{"-w", "5", "-t", "filter"}, args...)...).CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		for {
			if _, err := ipt("-D", "FORWARD", "-j", r.chain); err != nil {
				break
			}
		}
		_, _ = ipt("-F", r.chain)
		_, _ = ipt("-X", r.chain)
	})
	// count returns how many rules of the chain name the subnet and how many
	// jumps FORWARD has to the chain.
	count := func() (rules, jumps int) {
		t.Helper()
		out, _ := ipt("-S", r.chain)
		rules = strings.Count(out, "198.51.100.0/24")
		fwd, err := ipt("-S", "FORWARD")
		if err != nil {
			t.Fatalf("iptables -S FORWARD: %v: %s", err, fwd)
		}
		return rules, strings.Count(fwd, "-j "+r.chain+"\n")
	}

	ctx := context.Background()
	if err := r.Allow(ctx, []netip.Prefix{netip.MustParsePrefix("198.51.100.17/24")}); err != nil {
		t.Fatal(err)
	}
	if rules, jumps := count(); rules != 2 || jumps != 1 {
		out, _ := ipt("-S", r.chain)
		t.Fatalf("after Allow: %d rules naming the subnet, %d jumps; want 2 and 1\n%s", rules, jumps, out)
	}
	fwd, _ := ipt("-S", "FORWARD")
	if lines := strings.Split(strings.TrimSpace(fwd), "\n"); lines[len(lines)-1] != "-A FORWARD -j "+r.chain {
		t.Errorf("the jump is not FORWARD's last rule:\n%s", fwd)
	}

	r.Sync(ctx)
	r.Sync(ctx)
	if rules, jumps := count(); rules != 2 || jumps != 1 {
		t.Errorf("after two syncs: %d rules, %d jumps; want 2 and 1 (the real -S output must parse)", rules, jumps)
	}

	if out, err := ipt("-F", r.chain); err != nil {
		t.Fatalf("flush: %v: %s", err, out)
	}
	if out, err := ipt("-D", "FORWARD", "-j", r.chain); err != nil {
		t.Fatalf("delete the jump: %v: %s", err, out)
	}
	r.Sync(ctx)
	if rules, jumps := count(); rules != 2 || jumps != 1 {
		t.Errorf("after a flush and a sync: %d rules, %d jumps; want 2 and 1", rules, jumps)
	}
}
