package cpumanager

import (
	"fmt"
	"strconv"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/topologymanager"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"
)

// Policy names, the values of --cpu-manager-policy.
const (
	PolicyNone   = "none"
	PolicyStatic = "static"
)

// Names of upstream's static policy options (cpuManagerPolicyOptions).
const (
	optionFullPCPUsOnly             = "full-pcpus-only"
	optionDistributeCPUsAcrossNUMA  = "distribute-cpus-across-numa"
	optionAlignBySocket             = "align-by-socket"
	optionDistributeCPUsAcrossCores = "distribute-cpus-across-cores"
	optionStrictCPUReservation      = "strict-cpu-reservation"
	optionPreferAlignByUncoreCache  = "prefer-align-cpus-by-uncorecache"
)

// policy is one CPU manager policy. Methods run under the Manager's mutex
// and change st in memory; the Manager persists it.
type policy interface {
	name() string
	// start validates (and for static initialises) a loaded or fresh state.
	start(st *state) error
	// allocate gives the container its CPUs, on the NUMA nodes of affinity
	// first (0: anywhere).
	allocate(st *state, pod *v1.Pod, container *v1.Container, affinity topologymanager.Mask) error
	removeContainer(st *state, podUID, containerName string)
	// affinity is the cpuset a container's cpuset_cpus gets (empty: none).
	affinity(st *state, podUID, containerName string) cpuset.CPUSet
}

// checkStaticOptions checks cpuManagerPolicyOptions for the static policy.
// Unknown options and options of a disabled maturity level fail with
// upstream's wording (alpha options are off by default, beta on). Known
// options this kubelet does not implement are refused unless set to false.
func checkStaticOptions(opts map[string]string) error {
	for name, value := range opts {
		switch name {
		case optionAlignBySocket, optionDistributeCPUsAcrossCores:
			return fmt.Errorf("CPU Manager Policy Alpha-level Options not enabled, but option %q provided", name)
		case optionFullPCPUsOnly, optionDistributeCPUsAcrossNUMA, optionStrictCPUReservation, optionPreferAlignByUncoreCache:
			on, err := strconv.ParseBool(value)
			if err != nil {
				return fmt.Errorf("bad value for option %q: %w", name, err)
			}
			if on {
				return fmt.Errorf("CPU Manager Policy option %q is not supported by this kubelet", name)
			}
		default:
			return fmt.Errorf("unknown CPU Manager Policy option: %q", name)
		}
	}
	return nil
}
