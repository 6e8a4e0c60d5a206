// Package runtimestate keeps the container runtime's health as the kubelet
// last saw it (upstream's runtimeState, fed by updateRuntimeUp): Run asks the
// runtime's Status every period and records whether the runtime and its
// network are ready. The kubelet's sync loop, its health check and the node's
// Ready condition read it.
//
// It is built before everything that reads it and depends only on the
// runtime, so the node status and the kubelet can share it without either
// knowing the other.
package runtimestate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/lifecycle"
)

// DefaultPeriod is how often Run checks the runtime (upstream's 5 s).
const DefaultPeriod = 5 * time.Second

var errNotChecked = errors.New("container runtime status not checked yet")

// StatusGetter is the runtime's Status call (the runtime manager).
type StatusGetter interface {
	Status(ctx context.Context) (*runtimeapi.StatusResponse, error)
}

// Options configures a State. Runtime is required.
type Options struct {
	Runtime StatusGetter
	// Period is how often Run checks the runtime; 0 = DefaultPeriod.
	Period time.Duration
	// Logger; nil: no logging.
	Logger *zap.Logger
}

// State is the last known health of the container runtime and its network.
// It is safe for concurrent use.
type State struct {
	runtime StatusGetter
	period  time.Duration
	logger  *zap.Logger
	loops   lifecycle.Loops // what Start began

	mu         sync.RWMutex
	runtimeErr error
	networkErr error
	// From the last answer of a ready runtime: nil before one.
	handlers []v1.NodeRuntimeHandler
	features *v1.NodeFeatures
}

// New returns a State that reports "not checked yet" until the first check.
func New(opts Options) (*State, error) {
	if opts.Runtime == nil {
		return nil, errors.New("runtimestate: Options.Runtime is required")
	}
	if opts.Period <= 0 {
		opts.Period = DefaultPeriod
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &State{runtime: opts.Runtime, period: opts.Period, logger: opts.Logger,
		runtimeErr: errNotChecked, networkErr: errNotChecked}, nil
}

// Start checks the runtime once, so that nothing started after it reads
// "not checked yet", then in the background checks it again at once and
// every period until ctx ends (Wait waits for that).
func (s *State) Start(ctx context.Context) error {
	s.Check(ctx)
	s.loops.Go(s.logger, "runtime state", func() { s.run(ctx) })
	return nil
}

// Wait returns once the loop Start began has ended.
func (s *State) Wait() { s.loops.Wait() }

// run checks the runtime at once and then every period until ctx ends.
func (s *State) run(ctx context.Context) {
	t := time.NewTicker(s.period)
	defer t.Stop()
	for {
		s.Check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check asks the runtime's Status once and records the answer (upstream
// updateRuntimeUp). A check cut short by ctx records nothing.
func (s *State) Check(ctx context.Context) {
	st, err := s.runtime.Status(ctx)
	if ctx.Err() != nil {
		return
	}
	s.record(st, err)
	if err := s.RuntimeError(); err != nil {
		s.logger.Warn("Container runtime is not ready", zap.Error(err))
	}
}

// record stores the result of a runtime Status call; the handlers and
// features only when the runtime is ready, as upstream's updateRuntimeUp.
func (s *State) record(resp *runtimeapi.StatusResponse, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.runtimeErr = fmt.Errorf("container runtime status check failed: %w", err)
		s.networkErr = s.runtimeErr
		return
	}
	st := resp.GetStatus()
	s.runtimeErr = conditionError(st, runtimeapi.RuntimeReady, "container runtime")
	s.networkErr = conditionError(st, runtimeapi.NetworkReady, "container runtime network")
	if s.runtimeErr == nil {
		s.handlers, s.features = nodeRuntimeHandlers(resp.GetRuntimeHandlers()), nodeFeatures(resp.GetFeatures())
	}
}

// nodeRuntimeHandlers converts the runtime's handlers to the Node's
// status.runtimeHandlers (a missing features field reads as false).
func nodeRuntimeHandlers(hs []*runtimeapi.RuntimeHandler) []v1.NodeRuntimeHandler {
	out := make([]v1.NodeRuntimeHandler, len(hs))
	for i, h := range hs {
		rro, userns := h.GetFeatures().GetRecursiveReadOnlyMounts(), h.GetFeatures().GetUserNamespaces()
		out[i] = v1.NodeRuntimeHandler{Name: h.GetName(),
			Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: &rro, UserNamespaces: &userns}}
	}
	return out
}

// nodeFeatures converts the runtime's features to the Node's
// status.features; nil when the runtime reports none.
func nodeFeatures(f *runtimeapi.RuntimeFeatures) *v1.NodeFeatures {
	if f == nil {
		return nil
	}
	sgp := f.GetSupplementalGroupsPolicy()
	return &v1.NodeFeatures{SupplementalGroupsPolicy: &sgp}
}

// RuntimeHandlers returns the runtime's handlers as the Node's
// status.runtimeHandlers (empty before the runtime was first ready). The
// slice is shared: do not modify it.
func (s *State) RuntimeHandlers() []v1.NodeRuntimeHandler {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.handlers
}

// RuntimeFeatures returns the runtime's features as the Node's
// status.features; nil before the runtime was first ready. Shared: do not
// modify it.
func (s *State) RuntimeFeatures() *v1.NodeFeatures {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.features
}

// conditionError returns nil when the condition is true, else why not.
func conditionError(st *runtimeapi.RuntimeStatus, typ, what string) error {
	for _, c := range st.GetConditions() {
		if c.GetType() != typ {
			continue
		}
		if c.GetStatus() {
			return nil
		}
		return fmt.Errorf("%s not ready: %s: %s", what, c.GetReason(), c.GetMessage())
	}
	return fmt.Errorf("%s condition %s is missing", what, typ)
}

// RuntimeError is nil when the runtime is ready, else why not.
func (s *State) RuntimeError() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.runtimeErr
}

// NetworkError is nil when the runtime's network is ready, else why not.
func (s *State) NetworkError() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.networkErr
}

// ReadinessError is nil when the runtime and its network are ready, else the
// reason the node is not ready (the node's Ready condition message).
func (s *State) ReadinessError() error {
	if err := s.RuntimeError(); err != nil {
		return err
	}
	return s.NetworkError()
}
