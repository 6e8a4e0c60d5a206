package cpumanager

import (
	"encoding/json"
	"testing"

	"k8s.io/utils/cpuset"
)

// FuzzStateFile: any cpu_manager_state is restored or refused, never a panic
// or a hang; a restored state names no CPU above maxCPUID and is written back (encodeCheckpoint) as a file
// that restores to the same state. Each input is also tried with its v4
// dataChecksum recomputed, so that the fuzzer gets past the checksum (the v2
// layout with checksum 0 needs none).
func FuzzStateFile(f *testing.F) {
	for _, u := range upstreamFiles {
		f.Add([]byte(u.file))
	}
	for _, seed := range []string{
		`{"policyName":"static","defaultCpuSet":"0,3-7","entries":{"pod-a":{"app":"1-2"}},"checksum":0}`,
		`{"policyName":"static","defaultCpuSet":"0,4-7","entries":{"pod-a":{"app":"1-3"}},"podEntries":{"pod-a":{"cpuSet":"1-3"}},"checksum":4174994237}`,
		`{"policyName":"static","defaultCpuSet":"7-0","checksum":0}`,
		`{"policyName":"static","defaultCpuSet":"0-65535","entries":{"p":{"c":"65536"}},"checksum":0}`,
		`{"policyName":"static","defaultCpuSet":"0-1","data":"{\"policyName\":\"static\",\"defaultCpuSet\":\"0-63\",\"entries\":{\"p\":{\"c\":\"1,,2\"}}}","dataChecksum":1}`,
		`{"policyName":"none","defaultCpuSet":"","checksum":0}`,
		`{"policyName":"static","defaultCpuSet":"0-1","entries":{"abc":"2"}}`,
		`null`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	file := stateFile{dir: f.TempDir(), policy: PolicyStatic}
	f.Fuzz(func(t *testing.T, blob []byte) {
		checkStateFile(t, file, blob)
		var v4 checkpointV4
		if json.Unmarshal(blob, &v4) != nil || v4.Data == "" {
			return
		}
		v4.DataChecksum = dataChecksum(v4.Data)
		resealed, err := json.Marshal(v4)
		if err != nil {
			t.Fatal(err)
		}
		checkStateFile(t, file, resealed)
	})
}

// checkStateFile restores blob and, when that works, checks that the state
// written back restores to the same.
func checkStateFile(t *testing.T, file stateFile, blob []byte) {
	t.Helper()
	st, err := file.parse(blob)
	if err != nil {
		if st != nil {
			t.Fatalf("error %v with a state", err)
		}
		return
	}
	sets := []cpuset.CPUSet{st.defaultSet}
	for _, containers := range st.assignments {
		for _, set := range containers {
			sets = append(sets, set)
		}
	}
	for _, set := range sets {
		if ids := set.List(); len(ids) > 0 && (ids[0] < 0 || ids[len(ids)-1] > maxCPUID) {
			t.Fatalf("%s restored with CPUs %v", blob, set)
		}
	}
	again, err := encodeCheckpoint(file.policy, st.defaultSet, st.assignments)
	if err != nil {
		t.Fatal(err)
	}
	st2, err := file.parse(again)
	if err != nil || !st2.defaultSet.Equals(st.defaultSet) || len(st2.assignments) != len(st.assignments) {
		t.Fatalf("%s restored, written back as %s, restored as %+v, %v", blob, again, st2, err)
	}
	for pod, containers := range st.assignments {
		if len(st2.assignments[pod]) != len(containers) {
			t.Fatalf("pod %q: %v restored as %v", pod, containers, st2.assignments[pod])
		}
		for name, set := range containers {
			if got, ok := st2.assignments.get(pod, name); !ok || !got.Equals(set) {
				t.Fatalf("container %q of pod %q: %v restored as %v", name, pod, set, got)
			}
		}
	}
}
