package cpumanager

import (
	"testing"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"
)

func TestNewReservedCPUs(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		desc      string
		details   CPUDetails
		opts      Options
		want      string
		wantErr   string
		wantNoneP bool
	}{
		{desc: "1500m on SMT: ceil to 2, a whole core", details: eightCPUsSMT,
			opts: Options{Policy: "static", ReservedMilliCPU: 1500}, want: "0,4"},
		{desc: "100m: one thread", details: eightCPUsSMT,
			opts: Options{Policy: "static", ReservedMilliCPU: 100}, want: "0"},
		{desc: "3 on SMT: a core and a thread", details: eightCPUsSMT,
			opts: Options{Policy: "static", ReservedMilliCPU: 3000}, want: "0-1,4"},
		{desc: "2 on two sockets: core 0", details: dualSocketSMT,
			opts: Options{Policy: "static", ReservedMilliCPU: 2000}, want: "0,6"},
		{desc: "1 without SMT", details: twoCPUs,
			opts: Options{Policy: "static", ReservedMilliCPU: 1000}, want: "0"},
		{desc: "explicit reserved CPUs win", details: eightCPUsSMT,
			opts: Options{Policy: "static", ReservedCPUs: set(3, 7), ReservedMilliCPU: 1000}, want: "3,7"},
		{desc: "no reservation", details: twoCPUs, opts: Options{Policy: "static"},
			wantErr: "[cpumanager] unable to determine reserved CPU resources for static policy"},
		{desc: "more than the machine", details: twoCPUs, opts: Options{Policy: "static", ReservedMilliCPU: 2500},
			wantErr: "new static policy error: [cpumanager] unable to reserve the required amount of CPUs (size of  did not equal 3)"},
		{desc: "explicit CPU the machine lacks", details: twoCPUs, opts: Options{Policy: "static", ReservedCPUs: set(5)},
			wantErr: "new static policy error: [cpumanager] unable to build the reserved physical CPUs from the reserved set: unknown CPU ID: 5"},
		{desc: "unknown option", details: twoCPUs,
			opts:    Options{Policy: "static", ReservedMilliCPU: 1000, PolicyOptions: map[string]string{"foo": "true"}},
			wantErr: `new static policy error: unknown CPU Manager Policy option: "foo"`},
		{desc: "alpha option", details: twoCPUs,
			opts:    Options{Policy: "static", ReservedMilliCPU: 1000, PolicyOptions: map[string]string{"align-by-socket": "true"}},
			wantErr: `new static policy error: CPU Manager Policy Alpha-level Options not enabled, but option "align-by-socket" provided`},
		{desc: "known option set to false is harmless", details: twoCPUs,
			opts: Options{Policy: "static", ReservedMilliCPU: 1000, PolicyOptions: map[string]string{"full-pcpus-only": "false"}}, want: "0"},
		{desc: "alpha option with its gate: not supported here", details: twoCPUs,
			opts: Options{Policy: "static", ReservedMilliCPU: 1000, OptionGates: OptionGates{Alpha: true},
				PolicyOptions: map[string]string{"align-by-socket": "true"}},
			wantErr: `new static policy error: CPU Manager Policy option "align-by-socket" is not supported by this kubelet`},
		{desc: "beta option without its gate", details: twoCPUs,
			opts:    Options{Policy: "static", ReservedMilliCPU: 1000, PolicyOptions: map[string]string{"distribute-cpus-across-numa": "true"}},
			wantErr: `new static policy error: CPU Manager Policy Beta-level Options not enabled, but option "distribute-cpus-across-numa" provided`},
		{desc: "stable option this kubelet lacks", details: twoCPUs,
			opts:    Options{Policy: "static", ReservedMilliCPU: 1000, PolicyOptions: map[string]string{"prefer-align-cpus-by-uncorecache": "true"}},
			wantErr: `new static policy error: CPU Manager Policy option "prefer-align-cpus-by-uncorecache" is not supported by this kubelet`},
		{desc: "options that exclude each other", details: twoCPUs,
			opts: Options{Policy: "static", ReservedMilliCPU: 1000, OptionGates: OptionGates{Alpha: true, Beta: true},
				PolicyOptions: map[string]string{"full-pcpus-only": "true", "distribute-cpus-across-cores": "true"}},
			wantErr: `new static policy error: static policy options full-pcpus-only and distribute-cpus-across-cores can not be used at the same time`},
		{desc: "full-pcpus-only and strict-cpu-reservation", details: twoCPUs,
			opts: Options{Policy: "static", ReservedMilliCPU: 1000,
				PolicyOptions: map[string]string{"full-pcpus-only": "true", "strict-cpu-reservation": "True"}}, want: "0"},
		{desc: "bad option value", details: twoCPUs,
			opts:    Options{Policy: "static", ReservedMilliCPU: 1000, PolicyOptions: map[string]string{"full-pcpus-only": "yes"}},
			wantErr: `new static policy error: bad value for option "full-pcpus-only": strconv.ParseBool: parsing "yes": invalid syntax`},
		{desc: "none with options", details: twoCPUs,
			opts:    Options{Policy: "none", PolicyOptions: map[string]string{"foo": "bar"}},
			wantErr: "new none policy error: None policy: received unsupported options=map[foo:bar]"},
		{desc: "unknown policy", details: twoCPUs, opts: Options{Policy: "dynamic"},
			wantErr: `unknown policy: "dynamic"`},
		{desc: "empty policy is none", details: twoCPUs, opts: Options{}, wantNoneP: true},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			test.opts.Topology = mustTopology(t, test.details)
			test.opts.StateDir = t.TempDir()
			m, err := New(test.opts)
			if test.wantErr != "" {
				if err == nil || err.Error() != test.wantErr {
					t.Fatalf("err = %v, want %q", err, test.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if test.wantNoneP {
				if m.Policy() != PolicyNone {
					t.Fatalf("policy = %q", m.Policy())
				}
				return
			}
			if got := m.policy.(*staticPolicy).reserved; !got.Equals(mustParse(t, test.want)) {
				t.Errorf("reserved = %q, want %q", got, test.want)
			}
		})
	}
}

// allocation is one Allocate call in a sequence.
type allocation struct {
	pod       *v1.Pod
	container string
}

func podContainer(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

func TestStaticAllocate(t *testing.T) {
	t.Parallel()
	guaranteed2 := makePod("g2", nil, ctr("app", "2"))
	withInit := makePod("init", []v1.Container{ctr("init", "2")}, ctr("app", "2"))
	withSidecar := makePod("side", []v1.Container{sidecar("proxy", "2")}, ctr("app", "2"))
	burstable := makePod("burst", nil, ctr("app", "2"), ctr("nolimit", ""))
	fractional := makePod("frac", nil, ctr("app", "1500m"))
	podLevel := makePod("podlevel", nil, ctr("app", "2"))
	podLevel.Spec.Resources = &v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi")},
	}
	for _, test := range []struct {
		desc        string
		details     CPUDetails
		reserved    int64
		opts        staticOptions
		allocs      []allocation
		want        map[string]map[string]string
		wantDefault string
		wantErr     string // of the last allocation
	}{
		{
			desc: "full-pcpus-only: an odd request on SMT is refused", details: eightCPUsSMT, reserved: 1000,
			opts:        staticOptions{fullPCPUsOnly: true},
			allocs:      []allocation{{makePod("g1", nil, ctr("app", "1")), "app"}},
			want:        map[string]map[string]string{},
			wantDefault: "0-7",
			wantErr:     "SMT Alignment Error: requested 1 cpus not multiple cpus per core = 2",
		},
		{
			desc: "full-pcpus-only: whole cores beside the reserved CPU's core", details: eightCPUsSMT, reserved: 1000,
			opts:        staticOptions{fullPCPUsOnly: true},
			allocs:      []allocation{{makePod("g6", nil, ctr("app", "6")), "app"}},
			want:        map[string]map[string]string{"g6": {"app": "1-3,5-7"}},
			wantDefault: "0,4",
		},
		{
			desc: "full-pcpus-only: the reserved CPU's sibling does not count", details: eightCPUsSMT, reserved: 1000,
			opts:        staticOptions{fullPCPUsOnly: true},
			allocs:      []allocation{{makePod("g4", nil, ctr("app", "4")), "app"}, {makePod("g4b", nil, ctr("app", "4")), "app"}},
			want:        map[string]map[string]string{"g4": {"app": "1-2,5-6"}},
			wantDefault: "0,3-4,7",
			wantErr:     "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = 2, requested CPUs = 4, CPUs per core = 2",
		},
		{
			desc: "full-pcpus-only without SMT: any whole request", details: twoCPUs, reserved: 1000,
			opts:        staticOptions{fullPCPUsOnly: true},
			allocs:      []allocation{{makePod("g1", nil, ctr("app", "1")), "app"}},
			want:        map[string]map[string]string{"g1": {"app": "1"}},
			wantDefault: "0",
		},
		{
			desc: "strict-cpu-reservation: the pool starts without the reserved CPUs", details: eightCPUsSMT, reserved: 2000,
			opts:        staticOptions{strictCPUReservation: true},
			allocs:      []allocation{{guaranteed2, "app"}},
			want:        map[string]map[string]string{"g2": {"app": "1,5"}},
			wantDefault: "2-3,6-7",
		},
		{
			desc: "guaranteed integer request: a whole core beside the reserved one", details: eightCPUsSMT, reserved: 1000,
			allocs:      []allocation{{guaranteed2, "app"}},
			want:        map[string]map[string]string{"g2": {"app": "1,5"}},
			wantDefault: "0,2-4,6-7",
		},
		{
			desc: "again for the same container: nothing changes", details: eightCPUsSMT, reserved: 1000,
			allocs:      []allocation{{guaranteed2, "app"}, {guaranteed2, "app"}},
			want:        map[string]map[string]string{"g2": {"app": "1,5"}},
			wantDefault: "0,2-4,6-7",
		},
		{
			desc: "app container reuses the init container's CPUs", details: eightCPUsSMT, reserved: 1000,
			allocs:      []allocation{{withInit, "init"}, {withInit, "app"}},
			want:        map[string]map[string]string{"init": {"init": "1,5", "app": "1,5"}},
			wantDefault: "0,2-4,6-7",
		},
		{
			desc: "sidecar CPUs are not reused", details: eightCPUsSMT, reserved: 1000,
			allocs:      []allocation{{withSidecar, "proxy"}, {withSidecar, "app"}},
			want:        map[string]map[string]string{"side": {"proxy": "1,5", "app": "2,6"}},
			wantDefault: "0,3-4,7",
		},
		{
			desc: "burstable, fractional and pod-level pods share the pool", details: eightCPUsSMT, reserved: 1000,
			allocs: []allocation{
				{burstable, "app"}, {burstable, "nolimit"}, {fractional, "app"}, {podLevel, "app"},
			},
			want:        map[string]map[string]string{},
			wantDefault: "0-7",
		},
		{
			desc: "not enough CPUs on 2 CPUs with 1 reserved", details: twoCPUs, reserved: 1000,
			allocs:      []allocation{{guaranteed2, "app"}},
			want:        map[string]map[string]string{},
			wantDefault: "0-1",
			wantErr:     "not enough cpus available to satisfy request: requested=2, available=1",
		},
		{
			desc: "last free CPU of 2", details: twoCPUs, reserved: 1000,
			allocs:      []allocation{{makePod("g1", nil, ctr("app", "1")), "app"}},
			want:        map[string]map[string]string{"g1": {"app": "1"}},
			wantDefault: "0",
		},
		{
			desc: "two sockets: a NUMA node's worth", details: dualSocketSMT, reserved: 1000,
			allocs:      []allocation{{makePod("g6", nil, ctr("app", "6")), "app"}},
			want:        map[string]map[string]string{"g6": {"app": "1,3,5,7,9,11"}},
			wantDefault: "0,2,4,6,8,10",
		},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			topo := mustTopology(t, test.details)
			p, err := newStaticPolicy(topo, int((test.reserved+999)/1000), cpuset.New(), test.opts, mustMetrics(t), zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			st := &state{defaultSet: cpuset.New(), assignments: assignments{}}
			if err := p.start(st); err != nil {
				t.Fatal(err)
			}
			for i, a := range test.allocs {
				err = p.allocate(st, a.pod, podContainer(a.pod, a.container), 0)
				if err != nil && i < len(test.allocs)-1 {
					t.Fatalf("allocation %d: %v", i, err)
				}
			}
			if test.wantErr != "" {
				if err == nil || err.Error() != test.wantErr {
					t.Fatalf("err = %v, want %q", err, test.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			got := map[string]map[string]string{}
			for pod, containers := range st.assignments {
				got[pod] = map[string]string{}
				for name, s := range containers {
					got[pod][name] = s.String()
				}
			}
			if len(got) != len(test.want) {
				t.Fatalf("assignments = %v, want %v", got, test.want)
			}
			for pod, containers := range test.want {
				for name, s := range containers {
					if got[pod][name] != s {
						t.Errorf("%s/%s = %q, want %q (all: %v)", pod, name, got[pod][name], s, got)
					}
				}
			}
			if st.defaultSet.String() != test.wantDefault {
				t.Errorf("default = %q, want %q", st.defaultSet, test.wantDefault)
			}
		})
	}
}

func TestStaticRemoveContainer(t *testing.T) {
	t.Parallel()
	topo := mustTopology(t, eightCPUsSMT)
	p, err := newStaticPolicy(topo, 1, cpuset.New(), staticOptions{}, mustMetrics(t), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	st := &state{defaultSet: cpuset.New(), assignments: assignments{}}
	if err := p.start(st); err != nil {
		t.Fatal(err)
	}
	pod := makePod("init", []v1.Container{ctr("init", "2")}, ctr("app", "2"))
	for _, name := range []string{"init", "app"} {
		if err := p.allocate(st, pod, podContainer(pod, name), 0); err != nil {
			t.Fatal(err)
		}
	}
	p.removeContainer(st, "init", "init")
	if st.defaultSet.String() != "0,2-4,6-7" {
		t.Fatalf("after removing init (CPUs still used by app): default = %q", st.defaultSet)
	}
	p.removeContainer(st, "init", "app")
	if st.defaultSet.String() != "0-7" || len(st.assignments) != 0 {
		t.Fatalf("after removing app: default = %q, assignments %v", st.defaultSet, st.assignments)
	}
	p.removeContainer(st, "init", "app") // idempotent
	if st.defaultSet.String() != "0-7" {
		t.Fatalf("second removal changed the pool: %q", st.defaultSet)
	}
}

func TestStaticStartValidation(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		desc    string
		st      state
		strict  bool
		wantErr string
	}{
		{desc: "fresh", st: state{defaultSet: cpuset.New(), assignments: assignments{}}},
		{desc: "strict: fresh", st: state{defaultSet: cpuset.New(), assignments: assignments{}}, strict: true},
		{desc: "strict: consistent", st: state{defaultSet: set(2, 3, 4, 6, 7), assignments: assignments{"p": {"c": set(1, 5)}}}, strict: true},
		{desc: "strict: a reserved CPU in the pool (the option was just turned on)", strict: true,
			st:      state{defaultSet: set(0, 2, 3, 4, 6, 7), assignments: assignments{"p": {"c": set(1, 5)}}},
			wantErr: `some of strictly reserved cpus: "0" are present in defaultCpuSet: "0,2-4,6-7"`},
		{desc: "strict turned off: the reserved CPU is missing from the pool",
			st:      state{defaultSet: set(2, 3, 4, 6, 7), assignments: assignments{"p": {"c": set(1, 5)}}},
			wantErr: `not all reserved cpus: "0" are present in defaultCpuSet: "2-4,6-7"`},
		{desc: "consistent", st: state{defaultSet: set(0, 2, 3, 4, 6, 7), assignments: assignments{"p": {"c": set(1, 5)}}}},
		{desc: "empty pool with assignments", st: state{defaultSet: cpuset.New(), assignments: assignments{"p": {"c": set(1, 5)}}},
			wantErr: "default cpuset cannot be empty"},
		{desc: "reserved CPU assigned", st: state{defaultSet: set(1, 2, 3, 4, 5, 6, 7), assignments: assignments{"p": {"c": set(0)}}},
			wantErr: `not all reserved cpus: "0" are present in defaultCpuSet: "1-7"`},
		{desc: "overlap", st: state{defaultSet: set(0, 1, 2, 3, 4, 6, 7), assignments: assignments{"p": {"c": set(1, 5)}}},
			wantErr: `pod: p, container: c cpuset: "1,5" overlaps with default cpuset "0-4,6-7"`},
		{desc: "CPUs the machine lacks", st: state{defaultSet: set(0, 1, 2, 3, 4, 5, 6, 7, 8), assignments: assignments{}},
			wantErr: `current set of available CPUs "0-7" doesn't match with CPUs in state "0-8"`},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			p, err := newStaticPolicy(mustTopology(t, eightCPUsSMT), 1, cpuset.New(), staticOptions{strictCPUReservation: test.strict},
				mustMetrics(t), zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			fresh := test.st.defaultSet.IsEmpty()
			err = p.start(&test.st)
			if test.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if fresh && test.strict && test.st.defaultSet.String() != "1-7" {
					t.Errorf("strict: a fresh pool is %q, want 1-7 (without the reserved CPU)", test.st.defaultSet)
				}
				return
			}
			if err == nil || err.Error() != test.wantErr {
				t.Fatalf("err = %v, want %q", err, test.wantErr)
			}
		})
	}
}
