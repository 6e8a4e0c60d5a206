package podforward

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

const (
	// Chain is the filter table chain that holds the accept rules.
	Chain = "DOCKERSHIM-FORWARD"
	// ruleComment marks the rules for whoever reads the host's rule set.
	ruleComment = "dockershim: traffic of a pod subnet"
	// defaultResync is how often Run checks the rules.
	defaultResync = time.Minute
	// callTimeout bounds one iptables call.
	callTimeout = 30 * time.Second
)

// runner runs one iptables command and returns its standard output.
type runner interface {
	run(ctx context.Context, bin string, args ...string) (string, error)
}

// Options configures Rules.
type Options struct {
	// Logger receives structured logs; nil means no logging.
	Logger *zap.Logger
	// Resync is how often Run checks the rules (default one minute).
	Resync time.Duration
}

// Rules accepts the traffic of pod subnets in the FORWARD chain. It is safe
// for concurrent use.
type Rules struct {
	log    *zap.Logger
	cmd    runner
	resync time.Duration
	chain  string // Chain; tests use their own

	mu      sync.Mutex
	subnets []netip.Prefix    // every subnet allowed so far, masked
	lastErr map[family]string // the last sync error of each family, for logging changes only
}

// New returns Rules that run the host's iptables and ip6tables. It does no I/O.
func New(opts Options) *Rules {
	return newRules(opts, execRunner{})
}

func newRules(opts Options, cmd runner) *Rules {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	resync := opts.Resync
	if resync <= 0 {
		resync = defaultResync
	}
	return &Rules{log: log, cmd: cmd, resync: resync, chain: Chain, lastErr: map[family]string{}}
}

// Allow makes the FORWARD chain accept traffic from and to each subnet. A
// subnet it allowed before costs no iptables call; a new one is written at
// once, so the pod that brought it can be reached when Allow returns. On an
// error the subnet stays known and Run tries again.
func (r *Rules) Allow(ctx context.Context, subnets []netip.Prefix) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var fams []family
	for _, p := range subnets {
		p = p.Masked()
		if !p.IsValid() || slices.Contains(r.subnets, p) {
			continue
		}
		r.subnets = append(r.subnets, p)
		if f := familyOf(p); !slices.Contains(fams, f) {
			fams = append(fams, f)
		}
	}
	var errs []error
	for _, f := range fams {
		if err := r.syncLocked(ctx, f); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Run allows the subnets seed returns (those of the pods this host already
// runs), then checks the rules of every known subnet each Resync until ctx
// ends. It costs nothing while no subnet is known.
func (r *Rules) Run(ctx context.Context, seed func(context.Context) ([]netip.Prefix, error)) {
	if seed != nil {
		subnets, err := seed(ctx)
		if err != nil {
			r.log.Warn("reading the pod subnets already in use", zap.Error(err))
		}
		if err := r.Allow(ctx, subnets); err != nil {
			r.log.Warn("accepting pod traffic in the FORWARD chain", zap.Error(err))
		}
	}
	t := time.NewTicker(r.resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.Sync(ctx)
		}
	}
}

// Sync checks the rules of every known subnet and puts back the missing
// ones. Errors are logged when they change.
func (r *Rules) Sync(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range []family{ipv4, ipv6} {
		if slices.ContainsFunc(r.subnets, func(p netip.Prefix) bool { return familyOf(p) == f }) {
			_ = r.syncLocked(ctx, f)
		}
	}
}

// syncLocked makes the chain of family f hold an accept rule from and to
// each known subnet of f, and FORWARD jump to it: one call to list the
// chain and one to check the jump when nothing is missing.
func (r *Rules) syncLocked(ctx context.Context, f family) error {
	err := r.ensure(ctx, f)
	if msg := errText(err); msg != r.lastErr[f] {
		switch {
		case err != nil:
			r.log.Warn("accepting pod traffic in the FORWARD chain failed: pods may not reach each other if the FORWARD policy is DROP",
				zap.String("command", f.bin()), zap.Error(err))
		case r.lastErr[f] != "":
			r.log.Info("pod traffic accepted in the FORWARD chain again", zap.String("command", f.bin()))
		}
		r.lastErr[f] = msg
	}
	return err
}

func (r *Rules) ensure(ctx context.Context, f family) error {
	have, err := r.listChain(ctx, f)
	if err != nil {
		return err
	}
	for _, p := range r.subnets {
		if familyOf(p) != f {
			continue
		}
		for _, dir := range []string{"-s", "-d"} {
			if have[ruleKey{dir, p}] {
				continue
			}
			if _, err := r.call(ctx, f, "-A", r.chain, dir, p.String(), "-m", "comment", "--comment", ruleComment, "-j", "ACCEPT"); err != nil {
				return err
			}
			r.log.Info("accepting pod traffic in the FORWARD chain", zap.String("rule", dir+" "+p.String()), zap.String("chain", r.chain))
		}
	}
	if _, err := r.call(ctx, f, "-C", "FORWARD", "-j", r.chain); err == nil {
		return nil
	}
	_, err = r.call(ctx, f, "-A", "FORWARD", "-j", r.chain)
	return err
}

// ruleKey is one accept rule: its direction ("-s" or "-d") and subnet.
type ruleKey struct {
	dir    string
	subnet netip.Prefix
}

// listChain returns the accept rules the chain holds, creating the chain
// when it does not exist.
func (r *Rules) listChain(ctx context.Context, f family) (map[ruleKey]bool, error) {
	out, err := r.call(ctx, f, "-S", r.chain)
	if err != nil {
		// Missing, most likely: create it. Another instance may have
		// created it meanwhile, so a failure is checked with a second list.
		if _, nerr := r.call(ctx, f, "-N", r.chain); nerr == nil {
			return map[ruleKey]bool{}, nil
		}
		if out, err = r.call(ctx, f, "-S", r.chain); err != nil {
			return nil, err
		}
	}
	return parseRules(out, r.chain), nil
}

// parseRules reads the accept rules of `iptables -S <chain>` output.
func parseRules(out, chain string) map[ruleKey]bool {
	have := map[ruleKey]bool{}
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || fields[0] != "-A" || fields[1] != chain || !slices.Contains(fields, "ACCEPT") {
			continue
		}
		for i := 2; i+1 < len(fields); i++ {
			if fields[i] != "-s" && fields[i] != "-d" {
				continue
			}
			if p, err := netip.ParsePrefix(fields[i+1]); err == nil {
				have[ruleKey{fields[i], p.Masked()}] = true
			}
		}
	}
	return have
}

// call runs one command of family f's binary on the filter table, waiting
// for the xtables lock.
func (r *Rules) call(ctx context.Context, f family, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	out, err := r.cmd.run(ctx, f.bin(), append([]string{"-w", "5", "-t", "filter"}, args...)...)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", f.bin(), strings.Join(args, " "), err)
	}
	return out, nil
}

// family is an address family and the command that writes its rules.
type family int

const (
	ipv4 family = iota
	ipv6
)

func familyOf(p netip.Prefix) family {
	if p.Addr().Is4() {
		return ipv4
	}
	return ipv6
}

func (f family) bin() string {
	if f == ipv6 {
		return "ip6tables"
	}
	return "iptables"
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
