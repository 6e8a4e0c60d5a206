package topologymanager

import (
	"fmt"
	"math/bits"
)

// Mask is a set of NUMA nodes (bit n: node n, 0..63), upstream's BitMask.
// The zero Mask in a Hint means no preference (any NUMA node).
type Mask uint64

// NewMask returns the mask of nodes; a node outside 0..63 is an error.
func NewMask(nodes ...int) (Mask, error) {
	var m Mask
	for _, n := range nodes {
		if n < 0 || n > 63 {
			return 0, fmt.Errorf("bit number must be in range 0-63")
		}
		m |= 1 << uint(n)
	}
	return m, nil
}

// Count is the number of nodes in m.
func (m Mask) Count() int { return bits.OnesCount64(uint64(m)) }

// Nodes lists m's nodes, ascending.
func (m Mask) Nodes() []int {
	var out []int
	for n := 0; n < 64; n++ {
		if m&(1<<uint(n)) != 0 {
			out = append(out, n)
		}
	}
	return out
}

// Has says whether node n is in m.
func (m Mask) Has(n int) bool { return n >= 0 && n < 64 && m&(1<<uint(n)) != 0 }

// NarrowerThan is upstream's IsNarrowerThan: fewer nodes, or as many and
// the smaller number (lower nodes).
func (m Mask) NarrowerThan(o Mask) bool {
	if m.Count() == o.Count() {
		return m < o
	}
	return m.Count() < o.Count()
}

// String renders m as upstream's BitMask does (binary, padded to an even
// width: 1 is "01", 5 is "0101").
func (m Mask) String() string {
	width := 2
	for shift := 62; shift >= 2; shift -= 2 {
		if uint64(m) > 1<<uint(shift) {
			width = shift + 2
			break
		}
	}
	return fmt.Sprintf("%0*b", width, uint64(m))
}

// EachMask calls fn with every non-empty combination of nodes, by size
// (1 node first) and, within a size, in the order of nodes (upstream's
// IterateBitMasks).
func EachMask(nodes []int, fn func(Mask)) {
	var rec func(start, left int, m Mask)
	rec = func(start, left int, m Mask) {
		if left == 0 {
			fn(m)
			return
		}
		for i := start; i <= len(nodes)-left; i++ {
			rec(i+1, left-1, m|1<<uint(nodes[i]))
		}
	}
	for size := 1; size <= len(nodes); size++ {
		rec(0, size, 0)
	}
}
