//go:build linux

package e2e

import (
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The CNI rules a node's pods leave behind when the test ends with them
// running: the node's cleanup removes their containers with docker rm -f, so
// no CNI DEL runs and bridge's masquerade chains and portmap's DNAT chains
// stay. Left there they pile up over runs (a host had 50 sandboxes' worth)
// and, once a later node draws the same random subnet, they count as that
// node's leak. Each node sweeps its own subnet's rules at cleanup; the suite
// sweeps at start what killed runs left.

// ruleAddr matches an IPv4 address of the suite's node subnets
// (freeSubnet: 10.250-254.y.0/24), capturing its 10.x.y prefix.
var ruleAddr = regexp.MustCompile(`(?:^|[^0-9.])(10\.25[0-4]\.\d{1,3})\.\d{1,3}\b`)

// ruleComment captures the sandbox ID of bridge's and portmap's rule comments
// (`name: "<network>" id: "<container ID>"`).
var ruleComment = regexp.MustCompile(`id: \\"([0-9a-f]{64})\\"`)

// sweepRules removes, from the nat and filter tables, every rule that names
// an address whose 10.x.y prefix owns accepts, every rule whose comment names
// a sandbox such a rule names, and the per-sandbox CNI chains those rules jump
// to (portmap's shared CNI-HOSTPORT-* chains stay). One iptables-restore per
// table, so a rule is never half removed.
func sweepRules(owns func(prefix string) bool) error {
	for _, table := range []string{"nat", "filter"} {
		save, err := exec.Command("iptables-save", "-t", table).Output()
		if err != nil {
			return fmt.Errorf("iptables-save -t %s: %w", table, err)
		}
		script := sweepScript(table, string(save), owns)
		if script == "" {
			continue
		}
		cmd := exec.Command("iptables-restore", "-w", "--noflush")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("removing leftover CNI rules: iptables-restore: %w: %s\n%s", err, out, script)
		}
	}
	return nil
}

// sweepScript is the iptables-restore input that removes from table the
// rules sweepRules describes, "" when there are none.
func sweepScript(table, save string, owns func(prefix string) bool) string {
	var rules []string
	for _, line := range strings.Split(save, "\n") {
		if strings.HasPrefix(line, "-A ") {
			rules = append(rules, line)
		}
	}
	ids := map[string]bool{}
	hit := make([]bool, len(rules))
	for i, r := range rules {
		for _, m := range ruleAddr.FindAllStringSubmatch(r, -1) {
			if owns(m[1]) {
				hit[i] = true
			}
		}
		if hit[i] {
			for _, m := range ruleComment.FindAllStringSubmatch(r, -1) {
				ids[m[1]] = true
			}
		}
	}
	chains := map[string]bool{}
	for i, r := range rules {
		for _, m := range ruleComment.FindAllStringSubmatch(r, -1) {
			hit[i] = hit[i] || ids[m[1]]
		}
		if target := jumpTarget(r); hit[i] && strings.HasPrefix(target, "CNI-") && !slices.Contains(hostportChains, target) {
			chains[target] = true
		}
	}
	var b strings.Builder
	for i, r := range rules {
		chain := strings.Fields(r)[1]
		if chains[chain] {
			continue // flushed below
		}
		if hit[i] || chains[jumpTarget(r)] {
			fmt.Fprintf(&b, "-D%s\n", strings.TrimPrefix(r, "-A"))
		}
	}
	names := make([]string, 0, len(chains))
	for c := range chains {
		names = append(names, c)
	}
	slices.Sort(names)
	for _, c := range names {
		fmt.Fprintf(&b, "-F %s\n", c)
	}
	for _, c := range names {
		fmt.Fprintf(&b, "-X %s\n", c)
	}
	if b.Len() == 0 {
		return ""
	}
	return "*" + table + "\n" + b.String() + "COMMIT\n"
}

// jumpTarget is the chain a rule jumps to (-j), "" for none.
func jumpTarget(rule string) string {
	f := strings.Fields(rule)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "-j" {
			return f[i+1]
		}
	}
	return ""
}

// sweepStaleRules removes the rules of node subnets no live node holds (no
// route to the subnet: its bridge is gone), what runs killed before their
// cleanup left. A node's bridge exists before its first rule (bridge creates
// it in ADD) and goes after its sweep, so a live node's rules are never
// taken.
func sweepStaleRules() error {
	routes, err := exec.Command("ip", "-4", "route", "show").Output()
	if err != nil {
		return fmt.Errorf("ip route: %w", err)
	}
	return sweepRules(func(prefix string) bool {
		return !strings.Contains(string(routes), prefix+".0/24")
	})
}

// rulesNameSubnet reports whether any nat or filter rule names an address of
// the 10.x.y prefix.
func rulesNameSubnet(tb testing.TB, prefix string) bool {
	for _, table := range []string{"nat", "filter"} {
		save, err := exec.Command("iptables-save", "-t", table).Output()
		if err != nil {
			tb.Fatalf("iptables-save -t %s: %v", table, err)
		}
		for _, m := range ruleAddr.FindAllStringSubmatch(string(save), -1) {
			if m[1] == prefix {
				return true
			}
		}
	}
	return false
}

func TestSweepScript(t *testing.T) {
	const id1 = "b836f36a458cad3e446937f5a1f6ba81c5b1e67ec8917aaf3d29bf5a69532ae3"
	const id2 = "6196881e0b31099eaab0f8bef7eaace18721c175ede369742077433fe2965375"
	save := `*nat
:POSTROUTING ACCEPT [0:0]
:CNI-HOSTPORT-DNAT - [0:0]
:CNI-f52cd9fa799e575bee5da5c0 - [0:0]
:CNI-DN-f52cd9fa799e575bee5da - [0:0]
:CNI-b33a43d4f5b37d0e1b5dc153 - [0:0]
-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE
-A POSTROUTING -s 10.250.61.2/32 -m comment --comment "name: \"e2e\" id: \"` + id1 + `\"" -j CNI-f52cd9fa799e575bee5da5c0
-A POSTROUTING -s 10.254.183.3/32 -m comment --comment "name: \"e2e\" id: \"` + id2 + `\"" -j CNI-b33a43d4f5b37d0e1b5dc153
-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"e2e\" id: \"` + id1 + `\"" -m multiport --dports 36329 -j CNI-DN-f52cd9fa799e575bee5da
-A CNI-f52cd9fa799e575bee5da5c0 -d 10.250.61.0/24 -m comment --comment "name: \"e2e\" id: \"` + id1 + `\"" -j ACCEPT
-A CNI-f52cd9fa799e575bee5da5c0 ! -d 224.0.0.0/4 -m comment --comment "name: \"e2e\" id: \"` + id1 + `\"" -j MASQUERADE
-A CNI-DN-f52cd9fa799e575bee5da -p tcp -m tcp --dport 36329 -j DNAT --to-destination 10.250.61.2:8080
-A CNI-b33a43d4f5b37d0e1b5dc153 -d 10.254.183.0/24 -m comment --comment "name: \"e2e\" id: \"` + id2 + `\"" -j ACCEPT
COMMIT
`
	got := sweepScript("nat", save, func(p string) bool { return p == "10.250.61" })
	want := `*nat
-D POSTROUTING -s 10.250.61.2/32 -m comment --comment "name: \"e2e\" id: \"` + id1 + `\"" -j CNI-f52cd9fa799e575bee5da5c0
-D CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"e2e\" id: \"` + id1 + `\"" -m multiport --dports 36329 -j CNI-DN-f52cd9fa799e575bee5da
-F CNI-DN-f52cd9fa799e575bee5da
-F CNI-f52cd9fa799e575bee5da5c0
-X CNI-DN-f52cd9fa799e575bee5da
-X CNI-f52cd9fa799e575bee5da5c0
COMMIT
`
	if got != want {
		t.Errorf("sweepScript =\n%s\nwant\n%s", got, want)
	}
	if got := sweepScript("nat", save, func(p string) bool { return p == "10.250.6" }); got != "" {
		t.Errorf("a prefix of another subnet's prefix swept:\n%s", got)
	}
}
