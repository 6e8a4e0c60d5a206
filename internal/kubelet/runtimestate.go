package kubelet

import (
	"errors"
	"fmt"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var errRuntimeNotChecked = errors.New("container runtime status not checked yet")

// runtimeState is the last known health of the container runtime and its
// network (upstream runtimeState, fed by updateRuntimeUp).
type runtimeState struct {
	mu         sync.RWMutex
	runtimeErr error
	networkErr error
	checked    time.Time
}

func newRuntimeState() *runtimeState {
	return &runtimeState{runtimeErr: errRuntimeNotChecked, networkErr: errRuntimeNotChecked}
}

// update records the result of a runtime Status call.
func (s *runtimeState) update(st *runtimeapi.RuntimeStatus, err error, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checked = now
	if err != nil {
		s.runtimeErr = fmt.Errorf("container runtime status check failed: %w", err)
		s.networkErr = s.runtimeErr
		return
	}
	s.runtimeErr = conditionError(st, runtimeapi.RuntimeReady, "container runtime")
	s.networkErr = conditionError(st, runtimeapi.NetworkReady, "container runtime network")
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

func (s *runtimeState) runtimeError() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.runtimeErr
}

func (s *runtimeState) networkError() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.networkErr
}
