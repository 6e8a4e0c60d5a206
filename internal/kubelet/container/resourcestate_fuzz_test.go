package container

import (
	"encoding/json"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// FuzzResourceState: any allocated_pods_state (or actuated_pods_state) is
// read or refused, never a panic; a refusal comes with no entries; what is
// read is written back (encodeResourceState) as a file that reads the same.
// Each input is also tried resealed (its checksum recomputed) so that the
// fuzzer gets past the checksum.
func FuzzResourceState(f *testing.F) {
	f.Add([]byte(upstreamAllocated))
	for _, seed := range []string{
		`{"data":"{}","checksum":2166136261}`,
		`{"data":"{\"entries\":{\"u\":{\"ContainerResources\":{\"c\":{\"limits\":{\"cpu\":\"1e3\",\"example.com/x\":\"-1Ki\"}}},\"PodLevelResources\":{\"requests\":{\"memory\":\"0.5Gi\"}},\"EmptyDirVolumeLimits\":{\"scratch\":\"1Gi\",\"v\":null}}}}","checksum":1}`,
		`{"data":"{\"entries\":{\"u\":{\"ContainerResources\":{\"c\":{\"limits\":{\"cpu\":\"x\"}}}}}}","checksum":1}`,
		`{"data":"null","checksum":1}`, `{"data":"","checksum":0}`, `null`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkResourceState(t, data)
		var cp resourceCheckpoint
		if json.Unmarshal(data, &cp) != nil {
			return
		}
		cp.Checksum = resourceChecksum(cp.Data)
		resealed, err := json.Marshal(cp)
		if err != nil {
			t.Fatal(err)
		}
		checkResourceState(t, resealed)
	})
}

// checkResourceState reads data and, when that works, checks that what it
// holds is written back as a file that reads the same.
func checkResourceState(t *testing.T, data []byte) {
	t.Helper()
	entries, _, err := decodeResourceState(data)
	if err != nil {
		if entries != nil {
			t.Fatalf("error %v with entries %v", err, entries)
		}
		return
	}
	out, sum, err := encodeResourceState(entries)
	if err != nil {
		t.Fatalf("entries read from %s do not encode: %v", data, err)
	}
	again, sum2, err := decodeResourceState(out)
	if err != nil || sum2 != sum || !apiequality.Semantic.DeepEqual(again, entries) {
		t.Fatalf("%s read, written back as %s, read as %v, %v; want %v", data, out, again, err, entries)
	}
	for _, info := range entries {
		_ = info.deepCopy()
	}
}
