package nodestatus

import (
	"context"
	"errors"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// Known is what the node knows of its Node object: the object as the status
// controller last read it from or wrote it to the API server, whether the
// node is registered, and the requests for a status update at once. It is
// built before the controller, so that the parts that read the node
// (admission, the API pod source) or ask for an update (graceful node
// shutdown) need only this, not the controller, which is built after them
// (it reports their conditions). Safe for concurrent use.
type Known struct {
	mu         sync.Mutex
	node       *v1.Node
	registered bool
	syncNow    chan struct{}
	fetch      func(ctx context.Context) (*v1.Node, error) // SetFetch's; nil: FreshNode fails
}

// SetFetch gives FreshNode its way to read the node from the API server.
func (k *Known) SetFetch(fetch func(ctx context.Context) (*v1.Node, error)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fetch = fetch
}

// FreshNode reads the node from the API server now, keeps it as the latest
// state and returns a copy.
func (k *Known) FreshNode(ctx context.Context) (*v1.Node, error) {
	k.mu.Lock()
	fetch := k.fetch
	k.mu.Unlock()
	if fetch == nil {
		return nil, errors.New("no API server to read the node from")
	}
	node, err := fetch(ctx)
	if err != nil {
		return nil, err
	}
	k.store(node)
	return node.DeepCopy(), nil
}

// NewKnown returns an empty Known: no node, not registered.
func NewKnown() *Known { return &Known{syncNow: make(chan struct{}, 1)} }

// Node returns a copy of the last node read from or written to the API
// server; false before the first.
func (k *Known) Node() (*v1.Node, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.node == nil {
		return nil, false
	}
	return k.node.DeepCopy(), true
}

// Registered reports whether the node has been registered (created, or found
// and reconciled) with the API server.
func (k *Known) Registered() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.registered
}

// RequestSync asks the status controller for a node status update at once
// (the node shutdown manager asks so that Ready=False reaches the API before
// the pods stop, as upstream's syncNodeStatus). It does not wait; requests
// made while one is pending are one.
func (k *Known) RequestSync() {
	select {
	case k.syncNow <- struct{}{}:
	default: // one is pending already
	}
}

// syncRequests delivers the pending RequestSync.
func (k *Known) syncRequests() <-chan struct{} { return k.syncNow }

// store records node as the latest API state (nil is ignored).
func (k *Known) store(node *v1.Node) {
	if node == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.node = node
}

// markRegistered records node as registered and the latest API state.
func (k *Known) markRegistered(node *v1.Node) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.node = node
	k.registered = true
}

// reportedReady reports whether the last known node has Ready=True.
func (k *Known) reportedReady() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.node == nil {
		return false
	}
	cond := findCondition(k.node.Status.Conditions, v1.NodeReady)
	return cond != nil && cond.Status == v1.ConditionTrue
}
