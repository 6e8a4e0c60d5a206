package checkpoint

import (
	"os"
	"path/filepath"
	"testing"
)

// upstreamCheckpoint is what upstream's kubelet 1.37.1 writes for the same
// data (its devicemanager/checkpoint.New(...).MarshalCheckpoint(), run once
// in the throwaway build module).
const upstreamCheckpoint = `{"Data":{"PodDeviceEntries":[{"PodUID":"uid-1","ContainerName":"main","ResourceName":"example.com/fake","DeviceIDs":{"-1":["dev-0"]},"AllocResp":"CgMBAgM="}],"RegisteredDevices":{"example.com/fake":["dev-0","dev-1"]}},"Checksum":1094445632}`

func TestUpstreamFormat(t *testing.T) {
	dir := t.TempDir()
	entries := []PodDevicesEntry{{PodUID: "uid-1", ContainerName: "main", ResourceName: "example.com/fake",
		DeviceIDs: DevicesPerNUMA{-1: {"dev-0"}}, AllocResp: []byte{10, 3, 1, 2, 3}}}
	if err := Write(dir, entries, map[string][]string{"example.com/fake": {"dev-0", "dev-1"}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != upstreamCheckpoint {
		t.Errorf("checkpoint\n%s\nwant upstream's\n%s", b, upstreamCheckpoint)
	}
	// And upstream's file reads back.
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(upstreamCheckpoint), 0o600); err != nil {
		t.Fatal(err)
	}
	got, reg, err := Read(dir)
	if err != nil || len(got) != 1 || got[0].PodUID != "uid-1" || len(reg["example.com/fake"]) != 2 {
		t.Errorf("Read(upstream's) = %v %v %v", got, reg, err)
	}
}
