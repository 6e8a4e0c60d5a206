package nodestatus

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/klog/v2"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/nodepatch"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// Cadences and limits, as upstream.
const (
	// nodeStatusUpdateRetry is how many times one status update is attempted.
	nodeStatusUpdateRetry = 5
	// nodeReadyGracePeriod bounds the fast status updates after registration.
	nodeReadyGracePeriod = 120 * time.Second
	// fastStatusInterval is how often readiness is checked until the node is Ready.
	fastStatusInterval = 100 * time.Millisecond
	// registerBackoffMax caps the registration backoff (100ms doubling).
	registerBackoffMax = 7 * time.Second
	// leaseRenewFraction of LeaseDuration is the renew interval.
	leaseRenewFraction = 0.25
	// statusJitter is the jitter factor of the status update period.
	statusJitter = 0.04
)

// Start registers the node (retrying with backoff), then runs the status loop
// and the Lease controller, in the background until ctx ends (Wait waits for
// it).
func (c *Controller) Start(ctx context.Context) error {
	c.loops.Go(c.log, "node status", func() { c.run(ctx) })
	return nil
}

// Wait returns once the loop Start began has ended.
func (c *Controller) Wait() { c.loops.Wait() }

// run registers the node (retrying with backoff), then runs the status loop and
// the Lease controller until ctx ends.
func (c *Controller) run(ctx context.Context) {
	c.recordEvent(v1.EventTypeNormal, "Starting", "Starting kubelet.")
	if !c.registerWithAPIServer(ctx) {
		return
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer logging.HandleCrash(c.log, "node lease")
		c.runLease(ctx)
	}()
	c.runStatusLoop(ctx)
	wg.Wait()
}

// runStatusLoop updates the node status every StatusUpdateFrequency (jittered).
// Until the node is first reported Ready (at most nodeReadyGracePeriod after
// registration), readiness is also checked every fastStatusInterval so that the
// node turns Ready as soon as the runtime does, as upstream's fastStatusUpdateOnce.
func (c *Controller) runStatusLoop(ctx context.Context) {
	fastUntil := c.clock.Now().Add(nodeReadyGracePeriod)
	next := c.clock.Now()
	wasReady, fastDone := false, false
	for {
		now := c.clock.Now()
		fast := !fastDone && !c.known.reportedReady() && now.Before(fastUntil)
		fastDone = !fast
		// In fast mode an update is due when readiness turns nil; a failed update
		// is retried at the regular cadence.
		becameReady := false
		if fast {
			ready := c.opts.Readiness() == nil
			becameReady = ready && !wasReady
			wasReady = ready
		}
		if !now.Before(next) || becameReady {
			if err := c.updateNodeStatus(ctx); err != nil && ctx.Err() == nil {
				c.log.Error("Unable to update node status", zap.Error(err))
			}
			next = c.clock.Now().Add(wait.Jitter(c.opts.StatusUpdateFrequency, statusJitter))
			fast = fast && !c.known.reportedReady()
			fastDone = !fast
		}
		d := next.Sub(c.clock.Now())
		if fast && d > fastStatusInterval {
			d = fastStatusInterval
		}
		t := c.clock.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-c.known.syncRequests():
			t.Stop()
			next = c.clock.Now() // due now
		}
	}
}

// updateNodeStatus computes and, when needed, patches the node status, trying
// nodeStatusUpdateRetry times.
func (c *Controller) updateNodeStatus(ctx context.Context) error {
	for i := range nodeStatusUpdateRetry {
		err := c.tryUpdateNodeStatus(ctx, i)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if i > 0 && c.opts.OnRepeatedHeartbeatFailure != nil {
			c.opts.OnRepeatedHeartbeatFailure()
		}
		c.log.Warn("Error updating node status, will retry", zap.Int("attempt", i+1), zap.Error(err))
	}
	return fmt.Errorf("update node status exceeds retry count %d", nodeStatusUpdateRetry)
}

// tryUpdateNodeStatus GETs the node (the first try from the API server's cache),
// runs the setters on a copy and patches the status when it changed (heartbeat
// times aside) or when StatusReportFrequency passed since the last report.
func (c *Controller) tryUpdateNodeStatus(ctx context.Context, try int) error {
	opts := metav1.GetOptions{}
	if try == 0 {
		opts.ResourceVersion = "0"
	}
	original, err := c.opts.Client.CoreV1().Nodes().Get(ctx, c.opts.NodeName, opts)
	if err != nil {
		return fmt.Errorf("get node %q: %w", c.opts.NodeName, err)
	}
	node := original.DeepCopy()
	cidrChanged := false
	if len(node.Spec.PodCIDRs) != 0 && c.opts.UpdatePodCIDR != nil {
		if cidrChanged, err = c.opts.UpdatePodCIDR(ctx, strings.Join(node.Spec.PodCIDRs, ",")); err != nil {
			c.log.Error("Error updating pod CIDR", zap.Error(err))
		}
	}
	labelsFixed := ensureOSArchLabels(node)
	c.setNodeStatus(ctx, node)
	changed := cidrChanged || labelsFixed || statusChanged(&original.Status, &node.Status)
	expired := c.clock.Since(c.lastReport) >= c.opts.StatusReportFrequency+c.reportDelay
	if !changed && !expired {
		c.known.store(original)
		return nil
	}
	// As upstream: a random delay after a change (or the first report) spreads the
	// periodic reports of many nodes; later reports come at the fixed frequency.
	if changed || c.lastReport.IsZero() {
		c.reportDelay = time.Duration(float64(c.opts.StatusReportFrequency) * (rand.Float64() - 0.5))
	} else {
		c.reportDelay = 0
	}
	updated, err := nodepatch.Status(ctx, c.opts.Client.CoreV1().Nodes(), original, node)
	if err != nil {
		return err
	}
	c.lastReport = c.clock.Now()
	c.known.store(updated)
	if cond := findCondition(updated.Status.Conditions, v1.NodeReady); cond != nil && cond.Status == v1.ConditionTrue {
		c.startup.nodeReady()
	}
	return nil
}

// runLease runs the upstream Lease controller: a Lease named after the node in
// kube-node-lease, renewed every LeaseDuration/4, owned by the Node.
func (c *Controller) runLease(ctx context.Context) {
	log := c.log.Named("lease")
	duration := c.opts.LeaseDuration.Truncate(time.Second)
	renew := time.Duration(float64(duration) * leaseRenewFraction)
	lc := lease.NewController(c.clock, c.opts.Client, c.opts.NodeName, int32(duration/time.Second),
		c.opts.OnRepeatedHeartbeatFailure, renew, c.opts.NodeName, v1.NamespaceNodeLease,
		c.setLeaseOwner(ctx))
	lc.Run(klog.NewContext(ctx, zapr.NewLogger(log)))
}

// setLeaseOwner returns the lease post-processing func that makes the Node the
// Lease's owner (so that the Lease goes with the Node), as upstream's
// SetNodeOwnerFunc. An error blocks only the Lease's creation.
func (c *Controller) setLeaseOwner(ctx context.Context) func(*coordinationv1.Lease) error {
	return func(l *coordinationv1.Lease) error {
		if len(l.OwnerReferences) > 0 {
			return nil
		}
		node, ok := c.Node()
		if !ok || node.UID == "" {
			got, err := c.opts.Client.CoreV1().Nodes().Get(ctx, c.opts.NodeName, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get node %q for the lease owner: %w", c.opts.NodeName, err)
			}
			node = got
		}
		l.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "v1",
			Kind:       "Node",
			Name:       c.opts.NodeName,
			UID:        node.UID,
		}}
		return nil
	}
}

// recordEvent records an event about this node when a Recorder is set.
func (c *Controller) recordEvent(eventType, reason, message string) {
	if c.opts.Recorder == nil {
		return
	}
	ref := &v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: c.opts.NodeName}
	if node, ok := c.Node(); ok {
		ref.UID = node.UID
	}
	c.opts.Recorder.Event(ref, eventType, reason, message)
}

// recordNodeStatusEvent records a condition change as upstream does:
// "Node <name> status is now: <event>".
func (c *Controller) recordNodeStatusEvent(eventType, event string) {
	c.log.Debug("Recording node status event", zap.String("event", event))
	c.recordEvent(eventType, event, fmt.Sprintf("Node %s status is now: %s", c.opts.NodeName, event))
}
