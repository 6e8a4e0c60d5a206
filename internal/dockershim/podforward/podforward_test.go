package podforward

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
)

// fakeTables models the filter table of iptables and ip6tables: chains and
// their rules as `-S` prints them, and every call made.
type fakeTables struct {
	chains map[string]map[string][]string // bin -> chain -> rule args after "-A <chain>"
	calls  []string
	fail   func(call string) error // non-nil error: the call fails
}

func newFakeTables() *fakeTables {
	return &fakeTables{chains: map[string]map[string][]string{
		"iptables":  {"FORWARD": {"-j DOCKER-USER"}},
		"ip6tables": {"FORWARD": nil},
	}}
}

func (f *fakeTables) run(_ context.Context, bin string, args ...string) (string, error) {
	if len(args) < 6 || !reflect.DeepEqual(args[:4], []string{"-w", "5", "-t", "filter"}) {
		return "", fmt.Errorf("unexpected arguments %q", args)
	}
	call := bin + " " + strings.Join(args[4:], " ")
	f.calls = append(f.calls, call)
	if f.fail != nil {
		if err := f.fail(call); err != nil {
			return "", err
		}
	}
	op, chain, rule := args[4], args[5], strings.Join(args[6:], " ")
	chains := f.chains[bin]
	rules, exists := chains[chain]
	switch {
	case op == "-N" && exists:
		return "", errors.New("chain already exists")
	case op == "-N":
		chains[chain] = nil
	case !exists:
		return "", errors.New("no chain/target/match by that name")
	case op == "-S":
		out := "-N " + chain + "\n"
		for _, r := range rules {
			out += "-A " + chain + " " + r + "\n"
		}
		return out, nil
	case op == "-A":
		chains[chain] = append(rules, rule)
	case op == "-C" && !slices.Contains(rules, rule):
		return "", errors.New("bad rule (does a matching rule exist in that chain?)")
	}
	return "", nil
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func accept(dir, subnet string) string {
	return dir + " " + subnet + ` -m comment --comment ` + ruleComment + ` -j ACCEPT`
}

func TestAllowWritesChainRulesAndJumpOnce(t *testing.T) {
	t.Parallel()
	ft := newFakeTables()
	r := newRules(Options{Logger: zaptest.NewLogger(t)}, ft)
	ctx := context.Background()
	if err := r.Allow(ctx, prefixes("10.244.0.7/24")); err != nil {
		t.Fatal(err)
	}
	wantRules := []string{accept("-s", "10.244.0.0/24"), accept("-d", "10.244.0.0/24")}
	if got := ft.chains["iptables"][Chain]; !reflect.DeepEqual(got, wantRules) {
		t.Errorf("chain rules = %q, want %q", got, wantRules)
	}
	if got, want := ft.chains["iptables"]["FORWARD"], []string{"-j DOCKER-USER", "-j " + Chain}; !reflect.DeepEqual(got, want) {
		t.Errorf("FORWARD = %q, want %q (the jump appended after every rule)", got, want)
	}
	if _, ok := ft.chains["ip6tables"][Chain]; ok {
		t.Error("an IPv4 subnet created the ip6tables chain")
	}

	ft.calls = nil
	if err := r.Allow(ctx, prefixes("10.244.0.9/24", "10.244.0.0/24")); err != nil {
		t.Fatal(err)
	}
	if len(ft.calls) != 0 {
		t.Errorf("a known subnet ran iptables: %q", ft.calls)
	}
}

func TestAllowAddsOnlyWhatIsMissing(t *testing.T) {
	t.Parallel()
	ft := newFakeTables()
	// Another instance's subnet and the jump are there already.
	ft.chains["iptables"][Chain] = []string{accept("-s", "10.1.0.0/16"), accept("-d", "10.1.0.0/16")}
	ft.chains["iptables"]["FORWARD"] = append(ft.chains["iptables"]["FORWARD"], "-j "+Chain)
	r := newRules(Options{Logger: zaptest.NewLogger(t)}, ft)
	if err := r.Allow(context.Background(), prefixes("10.1.0.0/16", "fd00:10:244::/64")); err != nil {
		t.Fatal(err)
	}
	if got := len(ft.chains["iptables"][Chain]); got != 2 {
		t.Errorf("iptables chain has %d rules, want the 2 that were there: %q", got, ft.chains["iptables"][Chain])
	}
	if got := len(ft.chains["iptables"]["FORWARD"]); got != 2 {
		t.Errorf("FORWARD has %d rules, want 2 (no second jump): %q", got, ft.chains["iptables"]["FORWARD"])
	}
	want6 := []string{accept("-s", "fd00:10:244::/64"), accept("-d", "fd00:10:244::/64")}
	if got := ft.chains["ip6tables"][Chain]; !reflect.DeepEqual(got, want6) {
		t.Errorf("ip6tables chain = %q, want %q", got, want6)
	}
}

func TestSyncPutsBackWhatAFlushRemoved(t *testing.T) {
	t.Parallel()
	ft := newFakeTables()
	r := newRules(Options{Logger: zaptest.NewLogger(t)}, ft)
	ctx := context.Background()
	if err := r.Allow(ctx, prefixes("10.244.0.0/24")); err != nil {
		t.Fatal(err)
	}
	before := fmt.Sprint(ft.chains)

	ft.calls = nil
	r.Sync(ctx)
	if want := []string{"iptables -S " + Chain, "iptables -C FORWARD -j " + Chain}; !reflect.DeepEqual(ft.calls, want) {
		t.Errorf("a sync with nothing missing ran %q, want %q", ft.calls, want)
	}

	ft.chains = newFakeTables().chains // a firewall reload: FORWARD and our chain gone
	r.Sync(ctx)
	if after := fmt.Sprint(ft.chains); after != before {
		t.Errorf("after a flush and a sync the tables are\n%s\nwant\n%s", after, before)
	}
}

func TestSyncWithoutSubnetsCallsNothing(t *testing.T) {
	t.Parallel()
	ft := newFakeTables()
	r := newRules(Options{Logger: zaptest.NewLogger(t)}, ft)
	r.Sync(context.Background())
	if err := r.Allow(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if len(ft.calls) != 0 {
		t.Errorf("no subnet known, yet iptables ran: %q", ft.calls)
	}
}

func TestAllowErrorIsRetriedBySync(t *testing.T) {
	t.Parallel()
	ft := newFakeTables()
	broken := true
	ft.fail = func(call string) error {
		if broken && strings.HasPrefix(call, "iptables -A") {
			return errors.New("iptables: Permission denied")
		}
		return nil
	}
	r := newRules(Options{Logger: zaptest.NewLogger(t)}, ft)
	ctx := context.Background()
	err := r.Allow(ctx, prefixes("10.244.0.0/24"))
	if err == nil || !strings.Contains(err.Error(), "Permission denied") || !strings.Contains(err.Error(), "iptables -A "+Chain) {
		t.Fatalf("Allow = %v, want the failing command and its error", err)
	}
	broken = false
	r.Sync(ctx)
	if got := len(ft.chains["iptables"][Chain]); got != 2 {
		t.Errorf("after the retry the chain has %d rules, want 2", got)
	}
}

func TestChainCreatedMeanwhileByAnotherInstance(t *testing.T) {
	t.Parallel()
	ft := newFakeTables()
	lists := 0
	ft.fail = func(call string) error {
		if call == "iptables -S "+Chain {
			lists++
			if lists == 1 { // missing at the first look, then created by someone else
				ft.chains["iptables"][Chain] = nil
				return errors.New("no chain/target/match by that name")
			}
		}
		return nil
	}
	r := newRules(Options{Logger: zaptest.NewLogger(t)}, ft)
	if err := r.Allow(context.Background(), prefixes("10.244.0.0/24")); err != nil {
		t.Fatal(err)
	}
	if got := len(ft.chains["iptables"][Chain]); got != 2 {
		t.Errorf("chain has %d rules, want 2", got)
	}
}

func TestParseRules(t *testing.T) {
	t.Parallel()
	// As iptables 1.8 (nf_tables) prints them.
	out := `-N DOCKERSHIM-FORWARD
-A DOCKERSHIM-FORWARD -s 10.244.0.0/24 -m comment --comment "dockershim: traffic of a pod subnet" -j ACCEPT
-A DOCKERSHIM-FORWARD -d 10.244.0.0/24 -m comment --comment "dockershim: traffic of a pod subnet" -j ACCEPT
-A DOCKERSHIM-FORWARD -d 10.9.0.0/16 -j DROP
-A OTHER -s 10.8.0.0/16 -j ACCEPT
-A DOCKERSHIM-FORWARD -d fd00:10:244::/64 -j ACCEPT
`
	got := parseRules(out, Chain)
	want := map[ruleKey]bool{
		{"-s", netip.MustParsePrefix("10.244.0.0/24")}:    true,
		{"-d", netip.MustParsePrefix("10.244.0.0/24")}:    true,
		{"-d", netip.MustParsePrefix("fd00:10:244::/64")}: true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseRules = %v, want %v", got, want)
	}
}
