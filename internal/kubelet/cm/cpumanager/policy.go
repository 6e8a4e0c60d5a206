package cpumanager

import (
	"fmt"
	"maps"
	"slices"
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

// staticOptions are the static policy's options this kubelet acts on.
type staticOptions struct {
	// fullPCPUsOnly: exclusive CPUs come in whole physical cores; a request
	// that is not a multiple of the threads per core, or larger than the free
	// whole cores, is refused with SMTAlignmentError.
	fullPCPUsOnly bool
	// strictCPUReservation: the reserved CPUs are out of the shared pool too,
	// so that no pod runs on them.
	strictCPUReservation bool
}

// OptionGates are the feature gates that open upstream's alpha and beta
// static policy options (CPUManagerPolicyAlphaOptions, off by default, and
// CPUManagerPolicyBetaOptions, on by default: the zero value has both off,
// so callers pass the gates in force).
type OptionGates struct {
	Alpha, Beta bool
}

// parseStaticOptions reads cpuManagerPolicyOptions for the static policy as
// upstream's NewStaticPolicyOptions does, with its messages: an unknown
// option, one whose maturity level's gate is off, a value that is not a
// bool, or two options that cannot go together is an error. Of the options
// upstream has, this kubelet acts on full-pcpus-only and
// strict-cpu-reservation; the others are refused when true (a kubelet must
// not accept a placement rule it would not follow).
func parseStaticOptions(opts map[string]string, gates OptionGates) (staticOptions, error) {
	var o staticOptions
	on := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(opts)) {
		switch name {
		case optionAlignBySocket, optionDistributeCPUsAcrossCores:
			if !gates.Alpha {
				return o, fmt.Errorf("CPU Manager Policy Alpha-level Options not enabled, but option %q provided", name)
			}
		case optionDistributeCPUsAcrossNUMA:
			if !gates.Beta {
				return o, fmt.Errorf("CPU Manager Policy Beta-level Options not enabled, but option %q provided", name)
			}
		case optionFullPCPUsOnly, optionStrictCPUReservation, optionPreferAlignByUncoreCache:
		default:
			return o, fmt.Errorf("unknown CPU Manager Policy option: %q", name)
		}
		v, err := strconv.ParseBool(opts[name])
		if err != nil {
			return o, fmt.Errorf("bad value for option %q: %w", name, err)
		}
		on[name] = v
	}
	for _, pair := range [][2]string{
		{optionFullPCPUsOnly, optionDistributeCPUsAcrossCores},
		{optionDistributeCPUsAcrossNUMA, optionDistributeCPUsAcrossCores},
		{optionPreferAlignByUncoreCache, optionDistributeCPUsAcrossCores},
		{optionPreferAlignByUncoreCache, optionDistributeCPUsAcrossNUMA},
	} {
		if on[pair[0]] && on[pair[1]] {
			return o, fmt.Errorf("static policy options %s and %s can not be used at the same time", pair[0], pair[1])
		}
	}
	for _, name := range []string{optionDistributeCPUsAcrossNUMA, optionAlignBySocket, optionDistributeCPUsAcrossCores, optionPreferAlignByUncoreCache} {
		if on[name] {
			return o, fmt.Errorf("CPU Manager Policy option %q is not supported by this kubelet", name)
		}
	}
	o.fullPCPUsOnly, o.strictCPUReservation = on[optionFullPCPUsOnly], on[optionStrictCPUReservation]
	return o, nil
}
