package cpumanager

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
	"k8s.io/utils/dump"
)

// StateFileName is the name of the CPU manager checkpoint in the state
// directory, the same file as upstream's kubelet (/var/lib/kubelet by
// default).
const StateFileName = "cpu_manager_state"

// ErrCorruptCheckpoint is returned (wrapped) when a checkpoint's checksum does
// not match its content. Its text is upstream's.
var ErrCorruptCheckpoint = errors.New("checkpoint is corrupted")

// The state file, as upstream v1.37 writes it (its "v4" checkpoint):
//
//	{"policyName":"static","defaultCpuSet":"0,3-7",
//	 "entries":{"<pod uid>":{"<container>":"1-2"}},"checksum":4265171751,
//	 "data":"{\"policyName\":\"static\",\"defaultCpuSet\":\"0,3-7\",\"entries\":{...}}",
//	 "dataChecksum":2374107750}
//
// on one line without a trailing newline ("entries" left out when empty).
// "data" is the JSON of the state and is authoritative; "dataChecksum"
// guards it. The first four fields repeat the state in the older "v2" layout
// with its checksum, so that an older kubelet can still read the file.
//
// Both checksums are upstream's checkpointmanager checksum: FNV-32a over the
// text go-spew prints for a Go value with k8s.io/utils/dump.ForHash (type
// names included, map keys sorted), stored as a uint64.
//
//   - dataChecksum is taken over the data string, i.e. over
//     "(string)" + data.
//   - checksum is taken over the v2 struct with its checksum zeroed, printed
//     under upstream's type names with "CPUManagerCheckpointV2" renamed
//     "CPUManagerCheckpoint" (the name kubelets before v1.36 hashed):
//     (*state.CPUManagerCheckpoint){PolicyName:(string)static
//     DefaultCPUSet:(string)0,3-7 Entries:(map[string]map[string]string)map[<pod uid>:map[<container>:1-2]]
//     Checksum:(checksum.Checksum)0}
//
// Reading follows upstream's fallback chain: the v4 layout when "data" or
// "dataChecksum" is set (no fallback if it is bad), else the v3 layout
// (v2 plus "podEntries", checksum under the names CPUManagerCheckpointV3 or
// CPUManagerCheckpoint), else the v2 layout (checksum under
// CPUManagerCheckpointV2 or CPUManagerCheckpoint; 0 means none). There is no
// v1 support, as upstream.

// checkpointData is the payload of the v4 layout ("data").
type checkpointData struct {
	PolicyName    string                         `json:"policyName"`
	DefaultCPUSet string                         `json:"defaultCpuSet"`
	Entries       map[string]map[string]string   `json:"entries,omitempty"`
	PodEntries    map[string]podEntry            `json:"podEntries,omitempty"`
	Baselines     map[string]map[string]baseline `json:"baselines,omitempty"`
}

// podEntry is a pod-level assignment (upstream's PodLevelResourceManagers,
// off by default); it is read to verify v3 checksums and otherwise ignored.
type podEntry struct {
	CPUSet cpuset.CPUSet
}

type podEntryJSON struct {
	CPUSet string `json:"cpuSet,omitempty"`
}

func (p podEntry) MarshalJSON() ([]byte, error) {
	return json.Marshal(podEntryJSON{CPUSet: p.CPUSet.String()})
}

func (p *podEntry) UnmarshalJSON(b []byte) error {
	var raw podEntryJSON
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	set, err := parseCPUs(raw.CPUSet)
	if err != nil {
		return fmt.Errorf("failed to parse cpuset: %w", err)
	}
	p.CPUSet = set
	return nil
}

// maxCPUID bounds the CPU IDs a checkpoint may name. Linux numbers CPUs
// below NR_CPUS, at most 8192 on every architecture; the bound leaves room
// for more.
const maxCPUID = 1<<16 - 1

// parseCPUs is cpuset.Parse for a CPU list read from a file. cpuset.Parse
// adds each CPU of a range one by one, so a short string such as
// "0-99999999999" would build a set of billions of CPUs (and one ending at
// the largest int never ends); here CPU IDs above maxCPUID, and lists naming
// more than maxCPUID+1 CPUs in all, are refused before any set is built.
func parseCPUs(s string) (cpuset.CPUSet, error) {
	if s == "" {
		return cpuset.New(), nil
	}
	listed := 0
	for _, r := range strings.Split(s, ",") {
		first, last, isRange := strings.Cut(r, "-")
		lo, err := strconv.Atoi(first)
		if err != nil {
			return cpuset.New(), err
		}
		hi := lo
		if isRange {
			if hi, err = strconv.Atoi(last); err != nil {
				return cpuset.New(), err
			}
		}
		if hi > maxCPUID {
			return cpuset.New(), fmt.Errorf("CPU %d in %q is above the largest supported CPU ID %d", hi, r, maxCPUID)
		}
		if lo <= hi {
			if listed += hi - lo + 1; listed > maxCPUID+1 {
				return cpuset.New(), fmt.Errorf("the list names more than %d CPUs", maxCPUID+1)
			}
		}
	}
	return cpuset.Parse(s)
}

// baseline is upstream's admission-time assignment record
// (InPlacePodVerticalScalingExclusiveCPUs, off by default); never written.
type baseline struct {
	Baseline string `json:"baseline"`
}

// checkpointV2 is the legacy part of the file, also the whole v2 layout.
type checkpointV2 struct {
	PolicyName    string                       `json:"policyName"`
	DefaultCPUSet string                       `json:"defaultCpuSet"`
	Entries       map[string]map[string]string `json:"entries,omitempty"`
	Checksum      uint64                       `json:"checksum"`
}

// checkpointV3 is the v3 layout.
type checkpointV3 struct {
	PolicyName    string                       `json:"policyName"`
	DefaultCPUSet string                       `json:"defaultCpuSet"`
	Entries       map[string]map[string]string `json:"entries,omitempty"`
	PodEntries    map[string]podEntry          `json:"podEntries,omitempty"`
	Checksum      uint64                       `json:"checksum"`
}

// checkpointV4 is the layout upstream v1.37 writes.
type checkpointV4 struct {
	checkpointV2
	Data         string `json:"data"`
	DataChecksum uint64 `json:"dataChecksum"`

	decoded *decodedCheckpoint // set by decodeV4
}

// fnvOf is upstream's checksum of an already printed value.
func fnvOf(printed string) uint64 {
	h := fnv.New32a()
	h.Write([]byte(printed))
	return uint64(h.Sum32())
}

// dataChecksum is upstream's checksum.New(data) for the data string.
func dataChecksum(data string) uint64 {
	return fnvOf(dump.ForHash(data))
}

// spewField prints one field the way go-spew prints it inside a struct.
func spewField(name string, v any) string {
	return " " + name + ":" + dump.ForHash(v)
}

// v2Checksum is the checksum of a v2 checkpoint (checksum field zeroed)
// printed as upstream's state.<typeName>.
func v2Checksum(typeName, policy, defaultSet string, entries map[string]map[string]string) uint64 {
	printed := "(*state." + typeName + "){PolicyName:" + dump.ForHash(policy) +
		spewField("DefaultCPUSet", defaultSet) +
		spewField("Entries", entries) +
		" Checksum:(checksum.Checksum)0}"
	return fnvOf(printed)
}

// v3Checksum is the checksum of a v3 checkpoint printed as upstream's
// state.<typeName>.
func v3Checksum(typeName string, cp *checkpointV3) uint64 {
	// go-spew prints the map's own type first; replace ours by upstream's.
	_, pods, _ := strings.Cut(dump.ForHash(cp.PodEntries), ")")
	printed := "(*state." + typeName + "){PolicyName:" + dump.ForHash(cp.PolicyName) +
		spewField("DefaultCPUSet", cp.DefaultCPUSet) +
		spewField("Entries", cp.Entries) +
		" PodEntries:(state.PodCPUAssignments)" + pods +
		" Checksum:(checksum.Checksum)0}"
	return fnvOf(printed)
}

// encodeCheckpoint renders the state file for the given state, byte for byte
// as upstream v1.37 does with default feature gates.
func encodeCheckpoint(policy string, defaultSet cpuset.CPUSet, assignments map[string]map[string]cpuset.CPUSet) ([]byte, error) {
	entries := make(map[string]map[string]string, len(assignments))
	for pod, containers := range assignments {
		entries[pod] = make(map[string]string, len(containers))
		for name, set := range containers {
			entries[pod][name] = set.String()
		}
	}
	data := checkpointData{PolicyName: policy, DefaultCPUSet: defaultSet.String(), Entries: entries}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("failed to serialize cpu manager checkpoint data: %w", err)
	}
	cp := checkpointV4{
		checkpointV2: checkpointV2{PolicyName: data.PolicyName, DefaultCPUSet: data.DefaultCPUSet, Entries: entries},
		Data:         string(raw),
		DataChecksum: dataChecksum(string(raw)),
	}
	cp.Checksum = v2Checksum("CPUManagerCheckpoint", cp.PolicyName, cp.DefaultCPUSet, cp.Entries)
	return json.Marshal(cp)
}

// decodedCheckpoint is what a checkpoint of any supported layout says.
type decodedCheckpoint struct {
	PolicyName    string
	DefaultCPUSet string
	Entries       map[string]map[string]string
}

// CorruptCheckpointError reports a checksum mismatch. Its text is
// upstream's; errors.Is(err, ErrCorruptCheckpoint) matches it.
type CorruptCheckpointError struct {
	// Stored is the checksum in the file, Computed the one of its content.
	Stored, Computed uint64
}

func (e *CorruptCheckpointError) Error() string { return ErrCorruptCheckpoint.Error() }

// Is matches ErrCorruptCheckpoint.
func (e *CorruptCheckpointError) Is(target error) bool { return target == ErrCorruptCheckpoint }

func corrupt(computed, stored uint64) error {
	return &CorruptCheckpointError{Stored: stored, Computed: computed}
}

// decodeCheckpoint reads a state file in the v4, v3 or v2 layout, verifying
// its checksum, with upstream's fallback rules.
func decodeCheckpoint(blob []byte) (*decodedCheckpoint, error) {
	v4 := checkpointV4{checkpointV2: checkpointV2{Entries: map[string]map[string]string{}}}
	err := decodeV4(blob, &v4)
	if err == nil {
		return v4.decoded, nil
	}
	if v4.Data != "" || v4.DataChecksum != 0 {
		return nil, fmt.Errorf("could not load v4 checkpoint: %w", err)
	}
	v3 := checkpointV3{Entries: map[string]map[string]string{}, PodEntries: map[string]podEntry{}}
	if err := decodeV3(blob, &v3); err == nil {
		return &decodedCheckpoint{PolicyName: v3.PolicyName, DefaultCPUSet: v3.DefaultCPUSet, Entries: v3.Entries}, nil
	}
	v2 := checkpointV2{Entries: map[string]map[string]string{}}
	if err := decodeV2(blob, &v2); err != nil {
		return nil, err
	}
	return &decodedCheckpoint{PolicyName: v2.PolicyName, DefaultCPUSet: v2.DefaultCPUSet, Entries: v2.Entries}, nil
}

func decodeV4(blob []byte, cp *checkpointV4) error {
	if err := json.Unmarshal(blob, cp); err != nil {
		return fmt.Errorf("failed to deserialize cpu manager checkpoint: %w", err)
	}
	var data checkpointData
	if err := json.Unmarshal([]byte(cp.Data), &data); err != nil {
		return fmt.Errorf("failed to deserialize cpu manager checkpoint data: %w", err)
	}
	if sum := dataChecksum(cp.Data); sum != cp.DataChecksum {
		return corrupt(sum, cp.DataChecksum)
	}
	cp.decoded = &decodedCheckpoint{PolicyName: data.PolicyName, DefaultCPUSet: data.DefaultCPUSet, Entries: data.Entries}
	return nil
}

func decodeV3(blob []byte, cp *checkpointV3) error {
	if err := json.Unmarshal(blob, cp); err != nil {
		return err
	}
	for _, name := range []string{"CPUManagerCheckpointV3", "CPUManagerCheckpoint"} {
		if v3Checksum(name, cp) == cp.Checksum {
			return nil
		}
	}
	return corrupt(v3Checksum("CPUManagerCheckpoint", cp), cp.Checksum)
}

func decodeV2(blob []byte, cp *checkpointV2) error {
	if err := json.Unmarshal(blob, cp); err != nil {
		return err
	}
	if cp.Checksum == 0 {
		return nil // accepted for files of the old file backend, as upstream
	}
	for _, name := range []string{"CPUManagerCheckpointV2", "CPUManagerCheckpoint"} {
		if v2Checksum(name, cp.PolicyName, cp.DefaultCPUSet, cp.Entries) == cp.Checksum {
			return nil
		}
	}
	return corrupt(v2Checksum("CPUManagerCheckpoint", cp.PolicyName, cp.DefaultCPUSet, cp.Entries), cp.Checksum)
}
