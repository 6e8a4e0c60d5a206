// Package checkpoint reads and writes the device manager's checkpoint,
// <root>/device-plugins/kubelet_internal_checkpoint, in upstream's format:
// {"Data":{"PodDeviceEntries":[...],"RegisteredDevices":{...}},"Checksum":N}
// where the checksum is FNV-32a over the k8s.io/utils/dump.ForHash rendering
// of Data. That rendering names the types (checkpoint.checkpointData,
// checkpoint.PodDevicesEntry, checkpoint.DevicesPerNUMA), so the package and
// type names here are part of the format: an upstream kubelet reads what this
// one wrote, and the other way round.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"

	"k8s.io/utils/dump"

	"github.com/kubelet-dockershim/kubelet/internal/atomicfile"
)

// FileName is the checkpoint's name in the device plugin directory.
const FileName = "kubelet_internal_checkpoint"

// DevicesPerNUMA maps a NUMA node to device IDs.
type DevicesPerNUMA map[int64][]string

// PodDevicesEntry is the allocation of one resource to one container.
type PodDevicesEntry struct {
	PodUID        string
	ContainerName string
	ResourceName  string
	DeviceIDs     DevicesPerNUMA
	// AllocResp is the plugin's ContainerAllocateResponse, protobuf-encoded.
	AllocResp []byte
}

type checkpointData struct {
	PodDeviceEntries  []PodDevicesEntry
	RegisteredDevices map[string][]string
}

// Data is the checkpoint file's content.
type Data struct {
	Data     checkpointData
	Checksum uint64
}

// ErrCorrupt is returned (wrapped) when the checksum does not match.
var ErrCorrupt = errors.New("checkpoint is corrupted")

func checksum(d checkpointData) uint64 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(d))
	return uint64(h.Sum32())
}

// Write stores entries and the registered devices (by resource) in dir,
// atomically (a temporary file renamed over the checkpoint).
func Write(dir string, entries []PodDevicesEntry, registered map[string][]string) error {
	b, err := encode(entries, registered)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, FileName), b, 0o600); err != nil {
		return fmt.Errorf("write device checkpoint: %w", err)
	}
	return nil
}

// encode renders the checkpoint file's content.
func encode(entries []PodDevicesEntry, registered map[string][]string) ([]byte, error) {
	d := Data{Data: checkpointData{PodDeviceEntries: entries, RegisteredDevices: registered}}
	d.Checksum = checksum(d.Data)
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encode device checkpoint: %w", err)
	}
	return b, nil
}

// Read loads the checkpoint of dir. A missing file is os.ErrNotExist; a
// checksum mismatch is ErrCorrupt.
func Read(dir string) ([]PodDevicesEntry, map[string][]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		return nil, nil, err
	}
	return decode(b)
}

// decode parses and verifies the checkpoint file's content.
func decode(b []byte) ([]PodDevicesEntry, map[string][]string, error) {
	var d Data
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, nil, fmt.Errorf("decode device checkpoint: %w", err)
	}
	if got := checksum(d.Data); got != d.Checksum {
		return nil, nil, fmt.Errorf("%w: checksum %d, want %d", ErrCorrupt, got, d.Checksum)
	}
	return d.Data.PodDeviceEntries, d.Data.RegisteredDevices, nil
}
