package state

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// The testdata files were written by upstream kubelet v1.37.1's own state
// package (pkg/kubelet/cm/memorymanager/state) for the states below.

func upstreamStatic() State {
	return State{
		Machine: NUMANodeMap{
			0: {NumberOfAssignments: 2, Cells: []int{0}, MemoryMap: map[v1.ResourceName]*MemoryTable{
				"memory":        {TotalMemSize: 8 << 30, SystemReserved: 1 << 30, Allocatable: 5 << 30, Reserved: 1 << 30, Free: 4 << 30},
				"hugepages-2Mi": {TotalMemSize: 2 << 30, Allocatable: 2 << 30, Free: 2 << 30},
			}},
			1: {Cells: []int{1}, MemoryMap: map[v1.ResourceName]*MemoryTable{
				"memory": {TotalMemSize: 8 << 30, Allocatable: 8 << 30, Free: 8 << 30},
			}},
		},
		Assignments: ContainerMemoryAssignments{"pod-uid-1": {"ctr": {{NUMAAffinity: []int{0}, Type: "memory", Size: 1 << 30}}}},
	}
}

func upstreamLegacy() State {
	return State{
		Machine: NUMANodeMap{0: {NumberOfAssignments: 1, Cells: []int{0}, MemoryMap: map[v1.ResourceName]*MemoryTable{
			"memory": {TotalMemSize: 4 << 30, SystemReserved: 1 << 30, Allocatable: 3 << 30, Reserved: 1 << 30, Free: 2 << 30}}}},
		Assignments: ContainerMemoryAssignments{"uid-a": {"c": {{NUMAAffinity: []int{0}, Type: "memory", Size: 1 << 30}}}},
	}
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEncodeMatchesUpstream(t *testing.T) {
	for _, tc := range []struct {
		file, policy string
		st           State
	}{
		{"none.v3", "None", State{}},
		{"static.v3", "Static", upstreamStatic()},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := Encode(tc.policy, tc.st)
			if err != nil {
				t.Fatal(err)
			}
			if want := readTestdata(t, tc.file); string(got) != string(want) {
				t.Errorf("Encode:\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestDecodeUpstreamLayouts(t *testing.T) {
	for _, tc := range []struct {
		file, policy string
		want         State
	}{
		{"none.v3", "None", State{Machine: NUMANodeMap{}, Assignments: ContainerMemoryAssignments{}}},
		{"static.v3", "Static", upstreamStatic()},
		{"static.v2", "Static", upstreamLegacy()},
		{"static-pod.v2", "Static", upstreamLegacy()},
		{"static.v1", "Static", upstreamLegacy()},
	} {
		t.Run(tc.file, func(t *testing.T) {
			policy, st, err := Decode(readTestdata(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if policy != tc.policy || !reflect.DeepEqual(st, tc.want) {
				t.Errorf("Decode = %q %+v, want %q %+v", policy, st, tc.policy, tc.want)
			}
		})
	}
}

func TestDecodeRefusesTampering(t *testing.T) {
	for _, tc := range []struct {
		desc, file, old, new string
	}{
		{"v3 data", "static.v3", `\"size\":1073741824`, `\"size\":1073741825`},
		{"v3 data checksum", "static.v3", `"dataChecksum":417686762`, `"dataChecksum":417686763`},
		{"v2", "static.v2", `"size":1073741824`, `"size":1073741825`},
		{"v1", "static.v1", `"size":1073741824`, `"size":1073741825`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			blob := string(readTestdata(t, tc.file))
			if !strings.Contains(blob, tc.old) {
				t.Fatalf("%s lacks %s", tc.file, tc.old)
			}
			_, _, err := Decode([]byte(strings.Replace(blob, tc.old, tc.new, 1)))
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode error %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestDecodeV1WithoutChecksum(t *testing.T) {
	policy, _, err := Decode([]byte(`{"policyName":"None","machineState":{},"checksum":0}`))
	if err != nil || policy != "None" {
		t.Fatalf("Decode = %q, %v; want None, nil", policy, err)
	}
}

func TestFileLoadSave(t *testing.T) {
	f := File{Dir: filepath.Join(t.TempDir(), "root")}
	if _, found, err := f.Load("Static"); found || err != nil {
		t.Fatalf("Load of no file = found %v, %v", found, err)
	}
	if err := f.Save("Static", upstreamStatic()); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(f.Path()); string(b) != string(readTestdata(t, "static.v3")) {
		t.Errorf("saved %s", b)
	}
	st, found, err := f.Load("Static")
	if !found || err != nil || !reflect.DeepEqual(st, upstreamStatic()) {
		t.Fatalf("Load = %+v found %v, %v", st, found, err)
	}
	_, _, err = f.Load("None")
	want := `could not restore state from checkpoint: [memorymanager] configured policy "None" differs from state checkpoint policy "Static", please drain this node and delete the memory manager checkpoint file "` + f.Path() + `" before restarting Kubelet`
	if err == nil || err.Error() != want {
		t.Fatalf("Load of another policy: %v\nwant %s", err, want)
	}
}
