package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/utils/dump"

	"github.com/kubelet-dockershim/kubelet/internal/atomicfile"
)

// FileName is the checkpoint's name in the state directory (upstream: the
// kubelet root directory).
const FileName = "memory_manager_state"

// The file, as upstream v1.37 writes it (its "v3" checkpoint), on one line
// without a trailing newline:
//
//	{"policyName":"Static","machineState":{"0":{...}},"entries":{...},"checksum":189337816,
//	 "data":"{\"policyName\":\"Static\",\"machineState\":{...},\"entries\":{...}}",
//	 "dataChecksum":417686762}
//
// "data" is the JSON of the state and is authoritative; "dataChecksum" guards
// it. The first fields repeat the state in the older "v1" layout with its
// checksum, so that an older kubelet can still read the file. "entries" is
// left out when empty.
//
// Both checksums are upstream's checkpointmanager checksum: FNV-32a over the
// text go-spew prints for a Go value with k8s.io/utils/dump.ForHash (type
// names included, map keys sorted), stored as a uint64:
//
//   - dataChecksum over the data string, i.e. over "(string)" + data;
//   - checksum over the v1 struct with its checksum zeroed, printed under
//     upstream's name state.MemoryManagerCheckpoint:
//     (*state.MemoryManagerCheckpoint){PolicyName:(string)Static
//     MachineState:(state.NUMANodeMap)map[...] Entries:(state.ContainerMemoryAssignments)map[...]
//     Checksum:(checksum.Checksum)0}
//
// Reading follows upstream's fallback chain: the v3 layout when "data" or
// "dataChecksum" is set (no fallback if it is bad); else the v2 layout (v1
// plus "podEntries", its checksum over that struct); else the v1 layout (a
// zero checksum accepted, as for files of the old file backend).

// data is the payload of the v3 layout ("data").
type data struct {
	PolicyName   string                     `json:"policyName"`
	MachineState NUMANodeMap                `json:"machineState"`
	Entries      ContainerMemoryAssignments `json:"entries,omitempty"`
	PodEntries   PodMemoryAssignments       `json:"podEntries,omitempty"`
}

// legacy is the v1 and v2 layouts (v1 has no podEntries) and the legacy
// part of v3.
type legacy struct {
	PolicyName   string                     `json:"policyName"`
	MachineState NUMANodeMap                `json:"machineState"`
	Entries      ContainerMemoryAssignments `json:"entries,omitempty"`
	PodEntries   PodMemoryAssignments       `json:"podEntries,omitempty"`
	Checksum     uint64                     `json:"checksum"`
}

// v3 is the layout upstream v1.37 writes: the v1 fields, then the data.
type v3 struct {
	PolicyName   string                     `json:"policyName"`
	MachineState NUMANodeMap                `json:"machineState"`
	Entries      ContainerMemoryAssignments `json:"entries,omitempty"`
	Checksum     uint64                     `json:"checksum"`
	Data         string                     `json:"data"`
	DataChecksum uint64                     `json:"dataChecksum"`
}

func fnvOf(printed string) uint64 {
	h := fnv.New32a()
	h.Write([]byte(printed))
	return uint64(h.Sum32())
}

// legacyChecksum is the checksum of the v1 layout, or with pods of the v2
// layout (whose PodEntries upstream prints even when empty).
func legacyChecksum(l *legacy, withPods bool) uint64 {
	printed := "(*state.MemoryManagerCheckpoint){PolicyName:" + dump.ForHash(l.PolicyName) +
		" MachineState:" + dump.ForHash(l.MachineState) +
		" Entries:" + dump.ForHash(l.Entries)
	if withPods {
		printed += " PodEntries:" + dump.ForHash(l.PodEntries)
	}
	return fnvOf(printed + " Checksum:(checksum.Checksum)0}")
}

// Encode renders the file for policy and st, byte for byte as upstream v1.37
// does with default feature gates.
func Encode(policy string, st State) ([]byte, error) {
	d := data{PolicyName: policy, MachineState: st.Machine, Entries: st.Assignments}
	if d.MachineState == nil {
		d.MachineState = NUMANodeMap{}
	}
	if d.Entries == nil {
		d.Entries = ContainerMemoryAssignments{}
	}
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("failed to serialize memory manager checkpoint data: %w", err)
	}
	cp := v3{PolicyName: policy, MachineState: d.MachineState, Entries: d.Entries, Data: string(raw),
		DataChecksum: fnvOf(dump.ForHash(string(raw)))}
	cp.Checksum = legacyChecksum(&legacy{PolicyName: policy, MachineState: d.MachineState, Entries: d.Entries}, false)
	return json.Marshal(cp)
}

// ErrCorrupt is returned (wrapped) when a checksum does not match its
// content. Its text is upstream's.
var ErrCorrupt = errors.New("checkpoint is corrupted")

// Decode reads a file of any supported layout, verifying its checksum, and
// returns its policy and state.
func Decode(blob []byte) (policy string, st State, err error) {
	var cp v3
	err = json.Unmarshal(blob, &cp)
	if err == nil {
		d := data{MachineState: NUMANodeMap{}, Entries: ContainerMemoryAssignments{}}
		if err = json.Unmarshal([]byte(cp.Data), &d); err != nil {
			err = fmt.Errorf("failed to deserialize memory manager checkpoint data: %w", err)
		} else if fnvOf(dump.ForHash(cp.Data)) != cp.DataChecksum {
			err = ErrCorrupt
		} else {
			return d.PolicyName, State{Machine: d.MachineState, Assignments: d.Entries}, nil
		}
	} else {
		err = fmt.Errorf("failed to deserialize memory manager checkpoint: %w", err)
	}
	if cp.Data != "" || cp.DataChecksum != 0 {
		return "", State{}, fmt.Errorf("could not load v3 checkpoint: %w", err)
	}
	for _, withPods := range []bool{true, false} {
		l := legacy{MachineState: NUMANodeMap{}, Entries: ContainerMemoryAssignments{}, PodEntries: PodMemoryAssignments{}}
		if err = json.Unmarshal(blob, &l); err != nil {
			continue
		}
		if !withPods && l.Checksum == 0 || legacyChecksum(&l, withPods) == l.Checksum {
			return l.PolicyName, State{Machine: l.MachineState, Assignments: l.Entries}, nil
		}
		err = ErrCorrupt
	}
	return "", State{}, err
}

// File is the checkpoint in a directory.
type File struct {
	Dir string
}

// Path is the file's path.
func (f File) Path() string { return filepath.Join(f.Dir, FileName) }

// Load reads the checkpoint of policy. found is false when there is none. A
// checkpoint of another policy or a bad one is an error worded as upstream's.
func (f File) Load(policy string) (st State, found bool, err error) {
	blob, err := os.ReadFile(f.Path())
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, false, nil
	}
	var stored string
	if err == nil {
		stored, st, err = Decode(blob)
	}
	if err == nil && stored != policy {
		err = fmt.Errorf("[memorymanager] configured policy %q differs from state checkpoint policy %q", policy, stored)
	}
	if err != nil {
		return State{}, true, fmt.Errorf("could not restore state from checkpoint: %w, please drain this node and delete the memory manager checkpoint file %q before restarting Kubelet",
			err, f.Path())
	}
	return st, true, nil
}

// Save writes the checkpoint of policy atomically (mode 0600, as
// upstream's), creating the directory (0755) when missing.
func (f File) Save(policy string, st State) error {
	blob, err := Encode(policy, st)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(f.Dir, 0o755); err != nil {
		return fmt.Errorf("create memory manager state dir: %w", err)
	}
	return atomicfile.WriteFile(f.Path(), blob, 0o600)
}
