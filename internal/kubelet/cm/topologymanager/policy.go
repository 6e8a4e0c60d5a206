package topologymanager

import (
	"fmt"
	"strconv"
)

// Hint is one place a provider could put a resource: the NUMA nodes
// (Affinity 0: any) and whether that place is as good as it gets
// (Preferred: as narrow as the request allows).
type Hint struct {
	Affinity  Mask
	Preferred bool
}

// Policy names (topologyManagerPolicy) and scopes (topologyManagerScope).
const (
	PolicyNone           = "none"
	PolicyBestEffort     = "best-effort"
	PolicyRestricted     = "restricted"
	PolicySingleNUMANode = "single-numa-node"
	ScopeContainer       = "container"
	ScopePod             = "pod"
)

// Policy option names (topologyManagerPolicyOptions), both stable in 1.37.
const (
	optionPreferClosestNUMA = "prefer-closest-numa-nodes"
	optionMaxNUMANodes      = "max-allowable-numa-nodes"
	defaultMaxNUMANodes     = 8
)

// policyOptions are the parsed topologyManagerPolicyOptions.
type policyOptions struct {
	preferClosest bool
	maxNUMANodes  int
}

func parseOptions(opts map[string]string) (policyOptions, error) {
	o := policyOptions{maxNUMANodes: defaultMaxNUMANodes}
	for name, value := range opts {
		switch name {
		case optionPreferClosestNUMA:
			b, err := strconv.ParseBool(value)
			if err != nil {
				return o, fmt.Errorf("bad value for option %q: %w", name, err)
			}
			o.preferClosest = b
		case optionMaxNUMANodes:
			n, err := strconv.Atoi(value)
			if err != nil {
				return o, fmt.Errorf("unable to convert policy option to integer %q: %w", name, err)
			}
			if n < defaultMaxNUMANodes {
				return o, fmt.Errorf("the minimum value of %q should not be less than %v", name, defaultMaxNUMANodes)
			}
			o.maxNUMANodes = n
		default:
			return o, fmt.Errorf("unknown Topology Manager Policy option: %q", name)
		}
	}
	return o, nil
}

// numaInfo is the machine's NUMA nodes and their distances (only with
// prefer-closest-numa-nodes).
type numaInfo struct {
	nodes     []int
	distances map[int][]uint64
}

func (n numaInfo) defaultMask() Mask {
	m, _ := NewMask(n.nodes...)
	return m
}

func narrowest(a, b Mask) Mask {
	if a.NarrowerThan(b) {
		return a
	}
	return b
}

// closest is the mask of the nodes nearer each other (the mean of the
// distances between every pair of its nodes, both ways and each to itself),
// the narrower first, the smaller number on a tie.
func (n numaInfo) closest(a, b Mask) Mask {
	if a.Count() != b.Count() {
		return narrowest(a, b)
	}
	da, db := n.avgDistance(a), n.avgDistance(b)
	switch {
	case da == db && a < b, da < db:
		return a
	}
	return b
}

func (n numaInfo) avgDistance(m Mask) float64 {
	nodes := m.Nodes()
	if len(nodes) == 0 {
		return 0
	}
	var sum uint64
	for _, a := range nodes {
		for _, b := range nodes {
			if row := n.distances[a]; b < len(row) {
				sum += row[b]
			}
		}
	}
	return float64(sum) / float64(len(nodes)*len(nodes))
}

// policy merges the providers' hints.
type policy struct {
	name string
	opts policyOptions
	numa numaInfo
}

// merge returns the best hint for the providers' hints (a list per provider
// and resource) and whether the policy admits it: best-effort always,
// restricted and single-numa-node only a preferred one.
func (p *policy) merge(providers []map[string][]Hint) (Hint, bool) {
	if p.name == PolicyNone {
		return Hint{}, true
	}
	lists := filterProviderHints(providers)
	if p.name == PolicySingleNUMANode {
		lists = singleNUMAHints(lists)
	}
	best := p.mergeLists(lists)
	if p.name == PolicySingleNUMANode && best.Affinity == p.numa.defaultMask() {
		best.Affinity = 0
	}
	return best, p.name == PolicyBestEffort || best.Preferred
}

// filterProviderHints turns each provider's answer into lists of hints: no
// answer (or none for a resource) is a preferred "any node", an empty list
// for a resource a non-preferred "any node" (it cannot be satisfied).
func filterProviderHints(providers []map[string][]Hint) [][]Hint {
	var all [][]Hint
	for _, hints := range providers {
		if len(hints) == 0 {
			all = append(all, []Hint{{Preferred: true}})
			continue
		}
		for _, h := range hints {
			switch {
			case h == nil:
				all = append(all, []Hint{{Preferred: true}})
			case len(h) == 0:
				all = append(all, []Hint{{}})
			default:
				all = append(all, h)
			}
		}
	}
	return all
}

// singleNUMAHints keeps the preferred hints of one node and the preferred
// "any node" ones.
func singleNUMAHints(lists [][]Hint) [][]Hint {
	out := make([][]Hint, 0, len(lists))
	for _, l := range lists {
		var kept []Hint
		for _, h := range l {
			if h.Preferred && (h.Affinity == 0 || h.Affinity.Count() == 1) {
				kept = append(kept, h)
			}
		}
		out = append(out, kept)
	}
	return out
}

// mergeLists tries every permutation (one hint of each list), ANDs their
// masks with every node, and keeps the best result (compare); none: every
// node, not preferred.
func (p *policy) mergeLists(lists [][]Hint) Hint {
	def := p.numa.defaultMask()
	bestNonPreferred := maxOfNarrowest(lists)
	var best *Hint
	perm := make([]Hint, len(lists))
	var rec func(i int)
	rec = func(i int) {
		if i == len(lists) {
			h := mergePermutation(def, perm)
			best = p.compare(best, &h, bestNonPreferred)
			return
		}
		for _, h := range lists[i] {
			perm[i] = h
			rec(i + 1)
		}
	}
	rec(0)
	if best == nil {
		return Hint{Affinity: def}
	}
	return *best
}

// mergePermutation ANDs the permutation's masks with def; the result is
// preferred only when every hint is and their masks are all equal.
func mergePermutation(def Mask, perm []Hint) Hint {
	merged, preferred := def, true
	var first Mask
	for _, h := range perm {
		if h.Affinity != 0 {
			if first == 0 {
				first = h.Affinity
			} else if h.Affinity != first {
				preferred = false
			}
			merged &= h.Affinity
		}
		if !h.Preferred {
			preferred = false
		}
	}
	return Hint{Affinity: merged, Preferred: preferred}
}

// maxOfNarrowest is the largest, over the lists, of the node count of each
// list's narrowest hint.
func maxOfNarrowest(lists [][]Hint) int {
	most := 0
	for _, l := range lists {
		var narrow Mask
		for _, h := range l {
			if h.Affinity != 0 && (narrow == 0 || h.Affinity.NarrowerThan(narrow)) {
				narrow = h.Affinity
			}
		}
		if narrow != 0 && narrow.Count() > most {
			most = narrow.Count()
		}
	}
	return most
}

// compareMasks picks between two masks: the narrower, or with
// prefer-closest-numa-nodes (not for single-numa-node) the closer.
func (p *policy) compareMasks(cur, cand *Hint) *Hint {
	if cur.Affinity == cand.Affinity {
		return cur
	}
	var best Mask
	if p.name != PolicySingleNUMANode && p.opts.preferClosest {
		best = p.numa.closest(cur.Affinity, cand.Affinity)
	} else {
		best = narrowest(cur.Affinity, cand.Affinity)
	}
	if best == cur.Affinity {
		return cur
	}
	return cand
}

// compare returns the better of the best so far and a candidate, as
// upstream's HintMerger: an empty mask never wins; preferred beats not;
// between preferred ones the mask comparison; between others, masks of
// exactly the count of the narrowest hints (b) first, then those below it
// (more nodes better), then those above it (fewer better).
func (p *policy) compare(cur, cand *Hint, b int) *Hint {
	switch {
	case cand.Affinity.Count() == 0:
		return cur
	case cur == nil:
		return cand
	case !cur.Preferred && cand.Preferred:
		return cand
	case cur.Preferred && !cand.Preferred:
		return cur
	case cur.Preferred && cand.Preferred:
		return p.compareMasks(cur, cand)
	}
	cc, nc := cur.Affinity.Count(), cand.Affinity.Count()
	switch {
	case cc > b:
		return p.compareMasks(cur, cand)
	case cc == b:
		if nc != b {
			return cur
		}
		return p.compareMasks(cur, cand)
	case nc > b:
		return cur
	case nc == b:
		return cand
	case nc > cc:
		return cand
	case nc < cc:
		return cur
	}
	return p.compareMasks(cur, cand)
}
