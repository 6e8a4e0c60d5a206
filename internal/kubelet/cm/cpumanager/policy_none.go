package cpumanager

import (
	"fmt"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/topologymanager"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"
)

// nonePolicy assigns nothing: every container runs on every CPU and its
// cpuset is never set. Its state file only records the policy name.
type nonePolicy struct{}

func newNonePolicy(opts map[string]string) (*nonePolicy, error) {
	if len(opts) > 0 {
		return nil, fmt.Errorf("None policy: received unsupported options=%v", opts)
	}
	return &nonePolicy{}, nil
}

func (nonePolicy) name() string       { return PolicyNone }
func (nonePolicy) start(*state) error { return nil }
func (nonePolicy) allocate(*state, *v1.Pod, *v1.Container, topologymanager.Mask) error {
	return nil
}
func (nonePolicy) removeContainer(*state, string, string)        {}
func (nonePolicy) affinity(*state, string, string) cpuset.CPUSet { return cpuset.New() }
