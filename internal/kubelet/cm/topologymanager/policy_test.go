package topologymanager

import (
	"testing"
)

func mask(nodes ...int) Mask {
	m, err := NewMask(nodes...)
	if err != nil {
		panic(err)
	}
	return m
}

func hint(preferred bool, nodes ...int) Hint {
	return Hint{Affinity: mask(nodes...), Preferred: preferred}
}

// The merge of upstream's policies on two NUMA nodes: its test vectors.
func TestMerge(t *testing.T) {
	t.Parallel()
	two := numaInfo{nodes: []int{0, 1}}
	type providers = []map[string][]Hint
	for _, tc := range []struct {
		desc      string
		providers providers
		want      map[string]Hint // by policy
		admit     map[string]bool
	}{
		{desc: "no providers", providers: nil,
			want:  map[string]Hint{PolicyBestEffort: hint(true, 0, 1), PolicyRestricted: hint(true, 0, 1), PolicySingleNUMANode: {Preferred: true}},
			admit: map[string]bool{PolicyBestEffort: true, PolicyRestricted: true, PolicySingleNUMANode: true}},
		{desc: "no preference for a resource", providers: providers{{"cpu": nil}},
			want:  map[string]Hint{PolicyBestEffort: hint(true, 0, 1), PolicyRestricted: hint(true, 0, 1), PolicySingleNUMANode: {Preferred: true}},
			admit: map[string]bool{PolicyBestEffort: true, PolicyRestricted: true, PolicySingleNUMANode: true}},
		{desc: "a resource that cannot be satisfied", providers: providers{{"cpu": {}}},
			want:  map[string]Hint{PolicyBestEffort: hint(false, 0, 1), PolicyRestricted: hint(false, 0, 1), PolicySingleNUMANode: {}},
			admit: map[string]bool{PolicyBestEffort: true, PolicyRestricted: false, PolicySingleNUMANode: false}},
		{desc: "two providers agree on node 0", providers: providers{
			{"cpu": {hint(true, 0), hint(true, 1), hint(false, 0, 1)}}, {"gpu": {hint(true, 0), hint(false, 0, 1)}}},
			want:  map[string]Hint{PolicyBestEffort: hint(true, 0), PolicyRestricted: hint(true, 0), PolicySingleNUMANode: hint(true, 0)},
			admit: map[string]bool{PolicyBestEffort: true, PolicyRestricted: true, PolicySingleNUMANode: true}},
		{desc: "one wider mask, both preferred: not preferred", providers: providers{
			{"cpu": {hint(true, 0)}}, {"gpu": {hint(true, 0, 1)}}},
			want:  map[string]Hint{PolicyBestEffort: hint(false, 0), PolicyRestricted: hint(false, 0), PolicySingleNUMANode: {}},
			admit: map[string]bool{PolicyBestEffort: true, PolicyRestricted: false, PolicySingleNUMANode: false}},
		{desc: "no common node", providers: providers{{"cpu": {hint(true, 0)}}, {"gpu": {hint(true, 1)}}},
			want:  map[string]Hint{PolicyBestEffort: hint(false, 0, 1), PolicyRestricted: hint(false, 0, 1), PolicySingleNUMANode: {}},
			admit: map[string]bool{PolicyBestEffort: true, PolicyRestricted: false, PolicySingleNUMANode: false}},
		{desc: "only both nodes together", providers: providers{{"cpu": {hint(true, 0, 1)}}},
			want:  map[string]Hint{PolicyBestEffort: hint(true, 0, 1), PolicyRestricted: hint(true, 0, 1), PolicySingleNUMANode: {}},
			admit: map[string]bool{PolicyBestEffort: true, PolicyRestricted: true, PolicySingleNUMANode: false}},
		// The widest of the providers' narrowest hints (2 nodes) is what a
		// non-preferred result may at best be.
		{desc: "non-preferred: the count of the widest narrowest hint first", providers: providers{
			{"cpu": {hint(false, 0), hint(false, 1), hint(false, 0, 1)}}, {"gpu": {hint(false, 0, 1)}}},
			want:  map[string]Hint{PolicyBestEffort: hint(false, 0, 1), PolicyRestricted: hint(false, 0, 1), PolicySingleNUMANode: {}},
			admit: map[string]bool{PolicyBestEffort: true, PolicyRestricted: false, PolicySingleNUMANode: false}},
	} {
		for _, name := range []string{PolicyBestEffort, PolicyRestricted, PolicySingleNUMANode} {
			p := &policy{name: name, numa: two}
			got, admit := p.merge(tc.providers)
			if got != tc.want[name] || admit != tc.admit[name] {
				t.Errorf("%s, %s: merge = %+v %v, want %+v %v", tc.desc, name, got, admit, tc.want[name], tc.admit[name])
			}
		}
	}
}

// prefer-closest-numa-nodes picks, among masks of as many nodes, the one
// whose nodes are nearest each other (not for single-numa-node).
func TestMergePreferClosest(t *testing.T) {
	t.Parallel()
	four := numaInfo{nodes: []int{0, 1, 2, 3}, distances: map[int][]uint64{
		0: {10, 32, 11, 32}, 1: {32, 10, 32, 11}, 2: {11, 32, 10, 32}, 3: {32, 11, 32, 10}}}
	hints := []map[string][]Hint{{"cpu": {hint(true, 0, 1), hint(true, 0, 2)}}}
	if got, _ := (&policy{name: PolicyBestEffort, numa: four}).merge(hints); got != hint(true, 0, 1) {
		t.Errorf("narrowest: %+v, want nodes 0,1 (the smaller mask)", got)
	}
	closest := &policy{name: PolicyBestEffort, numa: four, opts: policyOptions{preferClosest: true}}
	if got, _ := closest.merge(hints); got != hint(true, 0, 2) {
		t.Errorf("closest: %+v, want nodes 0,2 (distance 11)", got)
	}
}

func TestMaskString(t *testing.T) {
	t.Parallel()
	for m, want := range map[Mask]string{1: "01", 2: "10", 3: "11", 4: "100", 5: "0101"} {
		if got := m.String(); got != want {
			t.Errorf("%d: %q, want %q", m, got, want)
		}
	}
	var got []Mask
	EachMask([]int{0, 1, 2}, func(m Mask) { got = append(got, m) })
	want := []Mask{mask(0), mask(1), mask(2), mask(0, 1), mask(0, 2), mask(1, 2), mask(0, 1, 2)}
	if len(got) != len(want) {
		t.Fatalf("EachMask = %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("EachMask = %v, want %v", got, want)
		}
	}
}

func TestNewManagerErrors(t *testing.T) {
	t.Parallel()
	nine := []int{0, 1, 2, 3, 4, 5, 6, 7, 8}
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Policy: "strict", NUMANodes: []int{0}}, `unknown policy: "strict"`},
		{Options{Policy: PolicyRestricted, Scope: "node", NUMANodes: []int{0}}, `unknown scope: "node"`},
		{Options{Policy: PolicyRestricted, NUMANodes: nine}, "unsupported on machines with more than 8 NUMA Nodes"},
		{Options{Policy: PolicyRestricted, NUMANodes: []int{0}, PolicyOptions: map[string]string{"max-allowable-numa-nodes": "4"}},
			`the minimum value of "max-allowable-numa-nodes" should not be less than 8`},
		{Options{Policy: PolicyRestricted, NUMANodes: []int{0}, PolicyOptions: map[string]string{"spread": "true"}},
			`unknown Topology Manager Policy option: "spread"`},
		{Options{Policy: PolicyRestricted, NUMANodes: []int{0}, PolicyOptions: map[string]string{"prefer-closest-numa-nodes": "true"}},
			"cannot discover NUMA topology: error getting NUMA distances from cadvisor"},
	} {
		if _, err := New(tc.opts); err == nil || err.Error() != tc.want {
			t.Errorf("New(%+v) = %v, want %q", tc.opts, err, tc.want)
		}
	}
	if _, err := New(Options{Policy: PolicyRestricted, NUMANodes: nine, PolicyOptions: map[string]string{"max-allowable-numa-nodes": "16"}}); err != nil {
		t.Errorf("max-allowable-numa-nodes 16 on 9 nodes: %v", err)
	}
}
