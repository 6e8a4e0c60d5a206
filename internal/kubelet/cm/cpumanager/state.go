package cpumanager

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/utils/cpuset"

	"github.com/kubelet-dockershim/kubelet/internal/atomicfile"
)

// assignments maps pod UID -> container name -> exclusive CPUs.
type assignments map[string]map[string]cpuset.CPUSet

func (a assignments) get(podUID, name string) (cpuset.CPUSet, bool) {
	set, ok := a[podUID][name]
	return set, ok
}

func (a assignments) set(podUID, name string, cpus cpuset.CPUSet) {
	if a[podUID] == nil {
		a[podUID] = map[string]cpuset.CPUSet{}
	}
	a[podUID][name] = cpus
}

func (a assignments) remove(podUID, name string) {
	delete(a[podUID], name)
	if len(a[podUID]) == 0 {
		delete(a, podUID)
	}
}

// all is every CPU assigned to some container.
func (a assignments) all() cpuset.CPUSet {
	var sets []cpuset.CPUSet
	for _, containers := range a {
		for _, set := range containers {
			sets = append(sets, set)
		}
	}
	return cpuset.New().Union(sets...)
}

func (a assignments) clone() map[string]map[string]cpuset.CPUSet {
	out := make(map[string]map[string]cpuset.CPUSet, len(a))
	for pod, containers := range a {
		out[pod] = make(map[string]cpuset.CPUSet, len(containers))
		for name, set := range containers {
			out[pod][name] = set.Clone()
		}
	}
	return out
}

// state is what the CPU manager remembers: the shared pool (default set) and
// the exclusive assignments. The Manager's mutex guards it.
type state struct {
	defaultSet  cpuset.CPUSet
	assignments assignments
}

// stateFile is the checkpoint of a state in dir/StateFileName.
type stateFile struct {
	dir    string
	policy string
}

func (f stateFile) path() string { return filepath.Join(f.dir, StateFileName) }

// load reads the checkpoint. found is false when there is none. A
// checkpoint of another policy, a bad checksum or an unparsable set is an
// error worded as upstream's.
func (f stateFile) load() (st *state, found bool, err error) {
	blob, err := os.ReadFile(f.path())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err == nil {
		st, err = f.parse(blob)
	}
	if err != nil {
		return nil, true, fmt.Errorf("could not restore state from checkpoint: %w, please drain this node and delete the CPU manager checkpoint file %q before restarting Kubelet",
			err, f.path())
	}
	return st, true, nil
}

func (f stateFile) parse(blob []byte) (*state, error) {
	cp, err := decodeCheckpoint(blob)
	if err != nil {
		return nil, err
	}
	if cp.PolicyName != f.policy {
		return nil, fmt.Errorf("configured policy %q differs from state checkpoint policy %q", f.policy, cp.PolicyName)
	}
	def, err := parseCPUs(cp.DefaultCPUSet)
	if err != nil {
		return nil, fmt.Errorf("could not parse default CPU set %q: %w", cp.DefaultCPUSet, err)
	}
	st := &state{defaultSet: def, assignments: assignments{}}
	for pod, containers := range cp.Entries {
		st.assignments[pod] = make(map[string]cpuset.CPUSet, len(containers))
		for name, text := range containers {
			set, err := parseCPUs(text)
			if err != nil {
				return nil, fmt.Errorf("could not parse cpuset %q for container %q in pod %q: %w", text, name, pod, err)
			}
			st.assignments[pod][name] = set
		}
	}
	return st, nil
}

// save writes the checkpoint atomically (mode 0600, as upstream's),
// creating the directory (0755) when missing.
func (f stateFile) save(st *state) error {
	blob, err := encodeCheckpoint(f.policy, st.defaultSet, st.assignments)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return fmt.Errorf("create cpu manager state dir: %w", err)
	}
	return atomicfile.WriteFile(f.path(), blob, 0o600)
}
