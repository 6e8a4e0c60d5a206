// Package utilchains keeps upstream kubelet's iptables utility chains
// (makeIPTablesUtilChains, true by default), for each IP family whose
// iptables works on the host:
//   - KUBE-IPTABLES-HINT in the mangle table, whose presence tells other
//     components which iptables (legacy or nft) the host uses;
//   - IPv4 only: KUBE-FIREWALL in the filter table, jumped to first from
//     INPUT and OUTPUT, with the rule that drops packets to 127.0.0.0/8 from
//     elsewhere (the route_localnet hole of issue 90259);
//   - the canary chain KUBE-KUBELET-CANARY in mangle, nat and filter,
//     checked every minute: once something flushes the tables, the chains
//     and rules are made again.
//
// As upstream's kubelet, nothing is removed when the kubelet stops.
package utilchains

import (
	"context"
	"errors"
	"time"

	"github.com/coreos/go-iptables/iptables"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubelet-dockershim/kubelet/internal/lifecycle"
)

// Upstream's chain names.
const (
	HintChain     = "KUBE-IPTABLES-HINT"
	FirewallChain = "KUBE-FIREWALL"
	CanaryChain   = "KUBE-KUBELET-CANARY"
)

// canaryTables are where the canary chain is made; the first is checked.
var canaryTables = []string{"mangle", "nat", "filter"}

// localnetRule is upstream's KUBE-FIREWALL rule (kube-proxy makes an
// identical one).
var localnetRule = []string{
	"-m", "comment", "--comment", "block incoming localnet connections",
	"--dst", "127.0.0.0/8",
	"!", "--src", "127.0.0.0/8",
	"-m", "conntrack",
	"!", "--ctstate", "RELATED,ESTABLISHED,DNAT",
	"-j", "DROP",
}

// Upstream's timings: the canary check period, and how long a flush seen
// in the first table may take to reach the others.
const (
	defaultInterval = time.Minute
	flushPoll       = 100 * time.Millisecond
	flushTimeout    = 5 * time.Second
)

// Options configures a Manager.
type Options struct {
	Logger *zap.Logger
	// Interval is the canary check period (upstream's minute when zero).
	Interval time.Duration
}

// Manager keeps the chains of every IP family iptables works for.
type Manager struct {
	logger   *zap.Logger
	interval time.Duration
	loops    lifecycle.Loops
}

// New returns a Manager; it does no I/O.
func New(opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Interval <= 0 {
		opts.Interval = defaultInterval
	}
	return &Manager{logger: opts.Logger, interval: opts.Interval}
}

// Start makes the chains of each family iptables works for and watches
// their canaries until ctx ends. A family whose chains cannot be made is
// logged and left, as upstream: the kubelet needs none of it itself.
func (m *Manager) Start(ctx context.Context) error {
	families := present()
	if len(families) == 0 {
		m.logger.Info("No iptables support on this system; not creating the KUBE-IPTABLES-HINT chain")
		return nil
	}
	for _, ipt := range families {
		logger := m.logger.With(zap.String("protocol", protocolName(ipt)))
		if err := ensureRules(ipt); err != nil {
			logger.Info("Failed to initialize iptables rules; some functionality may be missing.", zap.Error(err))
			continue
		}
		logger.Info("Initialized iptables rules.")
		m.loops.Go(logger, "iptables canary", func() {
			monitor(ctx, ipt, m.interval, logger, func() {
				if err := ensureRules(ipt); err != nil {
					logger.Error("Failed to restore the iptables util chains after a flush", zap.Error(err))
				}
			})
		})
	}
	return nil
}

// Wait returns once the canary loops have ended.
func (m *Manager) Wait() { m.loops.Wait() }

// present returns iptables for IPv4 and IPv6 where they work (upstream's
// NewBestEffort: the nat table's POSTROUTING chain can be listed).
func present() []*iptables.IPTables {
	var out []*iptables.IPTables
	for _, proto := range []iptables.Protocol{iptables.ProtocolIPv4, iptables.ProtocolIPv6} {
		// Upstream waits 5 s at most for the xtables lock (-w 5); a lock
		// held longer is a resource error, tried again.
		ipt, err := iptables.New(iptables.IPFamily(proto), iptables.Timeout(5))
		if err != nil {
			continue
		}
		if _, err := ipt.List("nat", "POSTROUTING"); err != nil {
			continue
		}
		out = append(out, ipt)
	}
	return out
}

func protocolName(ipt *iptables.IPTables) string {
	if ipt.Proto() == iptables.ProtocolIPv6 {
		return "IPv6"
	}
	return "IPv4"
}

// ensureRules makes the hint chain and, for IPv4, KUBE-FIREWALL with its jumps and
// rule, each only when missing (upstream's syncIPTablesRules).
func ensureRules(ipt *iptables.IPTables) error {
	if err := ensureChain(ipt, "mangle", HintChain); err != nil {
		return err
	}
	if ipt.Proto() == iptables.ProtocolIPv6 {
		return nil // IPv6 has no localnet hole
	}
	if err := ensureChain(ipt, "filter", FirewallChain); err != nil {
		return err
	}
	for _, chain := range []string{"OUTPUT", "INPUT"} {
		if err := ipt.InsertUnique("filter", chain, 1, "-j", FirewallChain); err != nil {
			return err
		}
	}
	return ipt.AppendUnique("filter", FirewallChain, localnetRule...)
}

// ensureChain makes chain in table unless it exists (iptables -N exits 1).
func ensureChain(ipt *iptables.IPTables, table, chain string) error {
	err := ipt.NewChain(table, chain)
	var e *iptables.Error
	if errors.As(err, &e) && e.ExitStatus() == 1 {
		return nil
	}
	return err
}

// chainExists lists chain alone (iptables -S chain -t table); the error is
// the listing's, whatever the reason (upstream's ChainExists).
func chainExists(ipt *iptables.IPTables, table, chain string) (bool, error) {
	if _, err := ipt.List(table, chain); err != nil {
		return false, err
	}
	return true, nil
}

// isResourceError says whether iptables failed for want of a resource (exit
// status 4: the xtables lock held too long), not because the chain is gone.
func isResourceError(err error) bool {
	var e *iptables.Error
	return errors.As(err, &e) && e.ExitStatus() == 4
}

// monitor is upstream's canary watch: the canary chain made in each table
// (tried every interval till it is), then checked in the first table every
// interval; once gone, the others are given flushTimeout to go too, reload
// runs, and the canaries are made again. It returns when ctx ends.
func monitor(ctx context.Context, ipt *iptables.IPTables, interval time.Duration, logger *zap.Logger, reload func()) {
	for {
		err := wait.PollUntilContextCancel(ctx, interval, true, func(context.Context) (bool, error) {
			for _, table := range canaryTables {
				if err := ensureChain(ipt, table, CanaryChain); err != nil {
					logger.Error("Could not set up iptables canary", zap.String("table", table), zap.String("chain", CanaryChain), zap.Error(err))
					return false, nil
				}
			}
			return true, nil
		})
		if err == nil {
			err = wait.PollUntilContextCancel(ctx, interval, false, func(ctx context.Context) (bool, error) {
				exists, err := chainExists(ipt, canaryTables[0], CanaryChain)
				if exists {
					return false, nil
				}
				if isResourceError(err) {
					logger.Error("Could not check for iptables canary", zap.String("table", canaryTables[0]), zap.String("chain", CanaryChain), zap.Error(err))
					return false, nil
				}
				logger.Debug("IPTables canary deleted", zap.String("table", canaryTables[0]), zap.String("chain", CanaryChain))
				// The other canaries go too before the reload, so that it
				// does not come too soon.
				if err := wait.PollUntilContextTimeout(ctx, flushPoll, flushTimeout, true, func(context.Context) (bool, error) {
					return othersGone(ipt), nil
				}); err != nil && ctx.Err() == nil {
					logger.Info("Inconsistent iptables state detected")
				}
				return true, nil
			})
		}
		if err != nil || ctx.Err() != nil {
			return // ctx ended
		}
		logger.Debug("Reloading after iptables flush")
		reload()
	}
}

// othersGone says whether the canary is gone from every table but the first.
func othersGone(ipt *iptables.IPTables) bool {
	for _, table := range canaryTables[1:] {
		if exists, err := chainExists(ipt, table, CanaryChain); exists || isResourceError(err) {
			return false
		}
	}
	return true
}
