package cpumanager

import (
	"testing"
)

// The expectations follow upstream's takeByTopologyNUMAPacked step by step
// (see the comments); they fail if a level is skipped or sorted differently.
func TestTakeByTopology(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		desc      string
		details   CPUDetails
		available string
		num       int
		want      string
		wantErr   string
	}{
		{desc: "no SMT: first CPU", details: twoCPUs, available: "0-1", num: 1, want: "0"},
		{desc: "no SMT: what is left", details: twoCPUs, available: "1", num: 1, want: "1"},
		{desc: "no SMT: whole socket", details: twoCPUs, available: "0-1", num: 2, want: "0-1"},
		{desc: "no SMT: not enough", details: twoCPUs, available: "1", num: 2,
			wantErr: "not enough cpus available to satisfy request: requested=2, available=1"},
		{desc: "nothing asked", details: twoCPUs, available: "0-1", num: 0, want: ""},

		// One socket, cores {0,4} {1,5} {2,6} {3,7}.
		{desc: "SMT: one thread of the lowest core", details: eightCPUsSMT, available: "0-7", num: 1, want: "0"},
		{desc: "SMT: a whole core", details: eightCPUsSMT, available: "0-7", num: 2, want: "0,4"},
		{desc: "SMT: a whole core, then a thread of the next", details: eightCPUsSMT, available: "0-7", num: 3, want: "0-1,4"},
		{desc: "SMT: fill the partly used core first", details: eightCPUsSMT, available: "1-7", num: 1, want: "4"},
		{desc: "SMT: a whole core skips the partly used one", details: eightCPUsSMT, available: "1-7", num: 2, want: "1,5"},
		{desc: "SMT: three after the partly used core", details: eightCPUsSMT, available: "1-7", num: 3, want: "1,4-5"},
		{desc: "SMT: whole socket", details: eightCPUsSMT, available: "0-7", num: 8, want: "0-7"},
		{desc: "SMT: too many", details: eightCPUsSMT, available: "0-7", num: 9,
			wantErr: "not enough cpus available to satisfy request: requested=9, available=8"},

		// Two sockets/NUMA nodes: even CPUs on 0, odd on 1; cores {n, n+6}.
		{desc: "dual: whole NUMA node 0", details: dualSocketSMT, available: "0-11", num: 6, want: "0,2,4,6,8,10"},
		{desc: "dual: the free NUMA node when 0 is used", details: dualSocketSMT, available: "1-11", num: 6, want: "1,3,5,7,9,11"},
		{desc: "dual: node 0 then a thread of the other socket", details: dualSocketSMT, available: "0-11", num: 7, want: "0-2,4,6,8,10"},
		{desc: "dual: a core on the busier socket", details: dualSocketSMT, available: "0,2-11", num: 2, want: "3,9"},
		{desc: "dual: single thread fills the busier socket's core", details: dualSocketSMT, available: "0,2-11", num: 1, want: "7"},
		{desc: "dual: everything", details: dualSocketSMT, available: "0-11", num: 12, want: "0-11"},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			topo := mustTopology(t, test.details)
			got, err := takeByTopology(topo, mustParse(t, test.available), test.num)
			if test.wantErr != "" {
				if err == nil || err.Error() != test.wantErr {
					t.Fatalf("err = %v, want %q", err, test.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equals(mustParse(t, test.want)) {
				t.Errorf("got %q, want %q", got, test.want)
			}
		})
	}
}
