package cpumanager

import (
	"encoding/json"
	"errors"
	"hash/fnv"
	"reflect"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
)

const podA = "fa3c2d4e-0000-4000-8000-000000000001"

// Files as upstream v1.37 writes them. The checksums were derived from
// upstream's code (checksum.New = FNV-32a over dump.ForHash) and cross-checked
// with a stand-alone program that declares upstream's state and checksum
// types under their own package names and hashes them with
// k8s.io/utils/dump.
var upstreamFiles = []struct {
	desc        string
	policy      string
	defaultSet  string
	assignments map[string]map[string]cpuset.CPUSet
	file        string
}{
	{
		desc:       "static, no assignments",
		policy:     "static",
		defaultSet: "0-1",
		file:       `{"policyName":"static","defaultCpuSet":"0-1","checksum":1636926438,"data":"{\"policyName\":\"static\",\"defaultCpuSet\":\"0-1\"}","dataChecksum":989860433}`,
	},
	{
		desc:   "none",
		policy: "none",
		file:   `{"policyName":"none","defaultCpuSet":"","checksum":1353318690,"data":"{\"policyName\":\"none\",\"defaultCpuSet\":\"\"}","dataChecksum":3028111495}`,
	},
	{
		desc:        "static with an init container sharing its CPUs",
		policy:      "static",
		defaultSet:  "0,3-7",
		assignments: map[string]map[string]cpuset.CPUSet{podA: {"app": cpuset.New(1, 2), "init": cpuset.New(1, 2)}},
		file:        `{"policyName":"static","defaultCpuSet":"0,3-7","entries":{"fa3c2d4e-0000-4000-8000-000000000001":{"app":"1-2","init":"1-2"}},"checksum":4265171751,"data":"{\"policyName\":\"static\",\"defaultCpuSet\":\"0,3-7\",\"entries\":{\"fa3c2d4e-0000-4000-8000-000000000001\":{\"app\":\"1-2\",\"init\":\"1-2\"}}}","dataChecksum":2374107750}`,
	},
}

// TestChecksumVector hashes the exact text upstream's go-spew configuration
// prints for its v2 struct (written out by hand from the struct definition)
// and checks that v2Checksum builds the same text.
func TestChecksumVector(t *testing.T) {
	t.Parallel()
	const printed = "(*state.CPUManagerCheckpoint){PolicyName:(string)static DefaultCPUSet:(string)0-1 " +
		"Entries:(map[string]map[string]string)map[] Checksum:(checksum.Checksum)0}"
	h := fnv.New32a()
	h.Write([]byte(printed))
	if got := h.Sum32(); got != 1636926438 {
		t.Fatalf("fnv32a of the printed struct = %d, want 1636926438", got)
	}
	if got := v2Checksum("CPUManagerCheckpoint", "static", "0-1", map[string]map[string]string{}); got != 1636926438 {
		t.Errorf("v2Checksum = %d, want 1636926438", got)
	}
	// data checksum: go-spew prints a string as (string)<text>.
	h.Reset()
	h.Write([]byte(`(string){"policyName":"static","defaultCpuSet":"0-1"}`))
	if got, want := dataChecksum(`{"policyName":"static","defaultCpuSet":"0-1"}`), uint64(h.Sum32()); got != want || got != 989860433 {
		t.Errorf("dataChecksum = %d, want %d = 989860433", got, want)
	}
	// nil and empty maps print differently (<nil> vs map[]).
	if v2Checksum("CPUManagerCheckpointV2", "static", "0-1", nil) != 3271822781 {
		t.Error("v2Checksum with nil entries differs from upstream's")
	}
}

func TestEncodeCheckpointMatchesUpstream(t *testing.T) {
	t.Parallel()
	for _, test := range upstreamFiles {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			def, _ := cpuset.Parse(test.defaultSet)
			got, err := encodeCheckpoint(test.policy, def, test.assignments)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != test.file {
				t.Errorf("encoded\n%s\nwant\n%s", got, test.file)
			}
			cp, err := decodeCheckpoint(got)
			if err != nil {
				t.Fatal(err)
			}
			if cp.PolicyName != test.policy || cp.DefaultCPUSet != test.defaultSet {
				t.Errorf("decoded %+v", cp)
			}
			for pod, containers := range test.assignments {
				for name, set := range containers {
					if cp.Entries[pod][name] != set.String() {
						t.Errorf("decoded entry %s/%s = %q, want %q", pod, name, cp.Entries[pod][name], set)
					}
				}
			}
		})
	}
}

func TestDecodeCheckpoint(t *testing.T) {
	t.Parallel()
	entries := map[string]map[string]string{podA: {"app": "1-2", "init": "1-2"}}
	entriesJSON := `"entries":{"fa3c2d4e-0000-4000-8000-000000000001":{"app":"1-2","init":"1-2"}}`
	for _, test := range []struct {
		desc    string
		file    string
		want    *decodedCheckpoint
		wantErr string
	}{
		{
			desc: "v4 with a bad outer checksum: only dataChecksum counts",
			file: strings.Replace(upstreamFiles[0].file, "1636926438", "1", 1),
			want: &decodedCheckpoint{PolicyName: "static", DefaultCPUSet: "0-1"},
		},
		{
			desc:    "v4 with a bad dataChecksum",
			file:    strings.Replace(upstreamFiles[0].file, "989860433", "989860434", 1),
			wantErr: "could not load v4 checkpoint: checkpoint is corrupted",
		},
		{
			desc:    "v4 with edited data",
			file:    strings.Replace(upstreamFiles[0].file, `\"0-1\"`, `\"0\"`, 1),
			wantErr: "could not load v4 checkpoint: checkpoint is corrupted",
		},
		{
			desc:    "v4 with data that is not JSON",
			file:    `{"policyName":"static","defaultCpuSet":"0-1","checksum":0,"data":"{","dataChecksum":1}`,
			wantErr: "could not load v4 checkpoint: failed to deserialize cpu manager checkpoint data: unexpected end of JSON input",
		},
		{
			desc: "v2, checksum under the name CPUManagerCheckpointV2",
			file: `{"policyName":"static","defaultCpuSet":"0,3-7",` + entriesJSON + `,"checksum":183303435}`,
			want: &decodedCheckpoint{PolicyName: "static", DefaultCPUSet: "0,3-7", Entries: entries},
		},
		{
			desc: "v2, checksum under the legacy name CPUManagerCheckpoint",
			file: `{"policyName":"static","defaultCpuSet":"0,3-7",` + entriesJSON + `,"checksum":4265171751}`,
			want: &decodedCheckpoint{PolicyName: "static", DefaultCPUSet: "0,3-7", Entries: entries},
		},
		{
			desc: "v2 without checksum",
			file: `{"policyName":"static","defaultCpuSet":"0,3-7",` + entriesJSON + `,"checksum":0}`,
			want: &decodedCheckpoint{PolicyName: "static", DefaultCPUSet: "0,3-7", Entries: entries},
		},
		{
			desc:    "v2 with a wrong checksum",
			file:    `{"policyName":"static","defaultCpuSet":"0,3-7",` + entriesJSON + `,"checksum":183303436}`,
			wantErr: "checkpoint is corrupted",
		},
		{
			desc: "v3, standard checksum",
			file: `{"policyName":"static","defaultCpuSet":"0-1","checksum":984224451}`,
			want: &decodedCheckpoint{PolicyName: "static", DefaultCPUSet: "0-1", Entries: map[string]map[string]string{}},
		},
		{
			desc: "v3, legacy checksum",
			file: `{"policyName":"static","defaultCpuSet":"0-1","checksum":653018852}`,
			want: &decodedCheckpoint{PolicyName: "static", DefaultCPUSet: "0-1", Entries: map[string]map[string]string{}},
		},
		{
			desc: "v3 with pod entries",
			file: `{"policyName":"static","defaultCpuSet":"0,4-7","entries":{"pod-a":{"app":"1-3"}},"podEntries":{"pod-a":{"cpuSet":"1-3"}},"checksum":4174994237}`,
			want: &decodedCheckpoint{PolicyName: "static", DefaultCPUSet: "0,4-7", Entries: map[string]map[string]string{"pod-a": {"app": "1-3"}}},
		},
		{
			desc: "v3 with pod entries, legacy checksum",
			file: `{"policyName":"static","defaultCpuSet":"0,4-7","entries":{"pod-a":{"app":"1-3"}},"podEntries":{"pod-a":{"cpuSet":"1-3"}},"checksum":1514627930}`,
			want: &decodedCheckpoint{PolicyName: "static", DefaultCPUSet: "0,4-7", Entries: map[string]map[string]string{"pod-a": {"app": "1-3"}}},
		},
		{
			desc:    "not JSON",
			file:    `garbage`,
			wantErr: "invalid character 'g' looking for beginning of value",
		},
		{
			desc:    "v1 layout (container ID -> cpuset) is refused",
			file:    `{"policyName":"static","defaultCpuSet":"0-1","entries":{"abc":"2"}}`,
			wantErr: "json: cannot unmarshal string into Go struct field checkpointV2.entries of type map[string]string",
		},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			got, err := decodeCheckpoint([]byte(test.file))
			if test.wantErr != "" {
				if err == nil || err.Error() != test.wantErr {
					t.Fatalf("err = %v, want %q", err, test.wantErr)
				}
				if strings.Contains(test.wantErr, "corrupted") && !errors.Is(err, ErrCorruptCheckpoint) {
					t.Errorf("errors.Is(%v, ErrCorruptCheckpoint) = false", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, test.want) {
				t.Errorf("got %+v, want %+v", got, test.want)
			}
		})
	}
}

// TestStateFileBoundsCPULists: a CPU list in the state file cannot make the
// kubelet build a set of millions of CPUs (cpuset.Parse adds a range's CPUs
// one by one; a range ending at the largest int never ends): CPU IDs above
// maxCPUID and lists naming more than maxCPUID+1 CPUs are refused, in every
// layout, before any set is built.
func TestStateFileBoundsCPULists(t *testing.T) {
	t.Parallel()
	file := stateFile{dir: t.TempDir(), policy: PolicyStatic}
	for _, test := range []struct {
		desc, blob, wantErr string
	}{
		{"default set of a million CPUs", `{"policyName":"static","defaultCpuSet":"0-1048575","checksum":0}`,
			`could not parse default CPU set "0-1048575": CPU 1048575 in "0-1048575" is above the largest supported CPU ID 65535`},
		{"assignment to the largest int", `{"policyName":"static","defaultCpuSet":"0","entries":{"p":{"c":"2-9223372036854775807"}},"checksum":0}`,
			`could not parse cpuset "2-9223372036854775807" for container "c" in pod "p": CPU 9223372036854775807 in "2-9223372036854775807" is above the largest supported CPU ID 65535`},
		{"repeated ranges", `{"policyName":"static","defaultCpuSet":"0-65535,0-65535","checksum":0}`,
			`could not parse default CPU set "0-65535,0-65535": the list names more than 65536 CPUs`},
	} {
		if _, err := file.parse([]byte(test.blob)); err == nil || !strings.Contains(err.Error(), test.wantErr) {
			t.Errorf("%s: %v, want %q", test.desc, err, test.wantErr)
		}
	}
	// A v3 pod entry is parsed while the file is decoded, before its
	// checksum is checked.
	var pe podEntry
	if err := json.Unmarshal([]byte(`{"cpuSet":"0-1048575"}`), &pe); err == nil || !strings.Contains(err.Error(), "above the largest supported CPU ID") {
		t.Errorf("v3 pod entry of a million CPUs: %v", err)
	}
	st, err := file.parse([]byte(`{"policyName":"static","defaultCpuSet":"0-65535","checksum":0}`))
	if err != nil || st.defaultSet.Size() != maxCPUID+1 {
		t.Errorf("all CPUs up to maxCPUID: %v", err)
	}
}
