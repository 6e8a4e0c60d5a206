package container

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// The files of the in-place resize state in the kubelet's root directory
// (upstream's names): what the kubelet allocated to each pod, and what the
// runtime manager last applied to its containers.
const (
	AllocatedPodsStateFile = "allocated_pods_state"
	ActuatedPodsStateFile  = "actuated_pods_state"
)

// PodResourceInfo is the resources of one pod in a resource state file.
// Its fields have no JSON tags: upstream's file carries the Go field names.
type PodResourceInfo struct {
	ContainerResources   map[string]v1.ResourceRequirements
	PodLevelResources    *v1.ResourceRequirements
	EmptyDirVolumeLimits map[string]*resource.Quantity
}

// resourceCheckpointInfo is the data part of the file.
type resourceCheckpointInfo struct {
	Entries map[types.UID]PodResourceInfo `json:"entries,omitempty"`
}

// resourceCheckpoint is the file: the data as a JSON string and upstream's
// checksum of it (FNV-32a over the spew dump of a string, "(string)" and the
// text).
type resourceCheckpoint struct {
	Data     string `json:"data"`
	Checksum uint64 `json:"checksum"`
}

// ResourceState is a resource state file (allocated_pods_state or
// actuated_pods_state) in upstream's format, kept in memory and written
// through (temp file, fsync, rename) on every change. Safe for concurrent
// use.
type ResourceState struct {
	path string

	mu      sync.Mutex
	entries map[types.UID]PodResourceInfo
	saved   uint64 // checksum of the file on disk
}

// OpenResourceState reads dir/name; a missing file is an empty state, a
// corrupt one an error.
func OpenResourceState(dir, name string) (*ResourceState, error) {
	s := &ResourceState{path: filepath.Join(dir, name), entries: map[types.UID]PodResourceInfo{}}
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.path, err)
	}
	entries, sum, err := decodeResourceState(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.path, err)
	}
	if entries != nil {
		s.entries = entries
	}
	s.saved = sum
	return s, nil
}

// decodeResourceState parses and verifies a resource state file: its
// entries (nil when it has none) and checksum.
func decodeResourceState(data []byte) (map[types.UID]PodResourceInfo, uint64, error) {
	var cp resourceCheckpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return nil, 0, err
	}
	if sum := resourceChecksum(cp.Data); sum != cp.Checksum {
		return nil, 0, fmt.Errorf("checkpoint is corrupted (checksum %d, want %d)", cp.Checksum, sum)
	}
	var info resourceCheckpointInfo
	if err := json.Unmarshal([]byte(cp.Data), &info); err != nil {
		return nil, 0, err
	}
	return info.Entries, cp.Checksum, nil
}

// encodeResourceState renders a resource state file and its checksum.
func encodeResourceState(entries map[types.UID]PodResourceInfo) ([]byte, uint64, error) {
	data, err := json.Marshal(resourceCheckpointInfo{Entries: entries})
	if err != nil {
		return nil, 0, err
	}
	cp := resourceCheckpoint{Data: string(data), Checksum: resourceChecksum(string(data))}
	out, err := json.Marshal(cp)
	if err != nil {
		return nil, 0, err
	}
	return out, cp.Checksum, nil
}

// resourceChecksum is upstream's checksum of the data string.
func resourceChecksum(data string) uint64 {
	h := fnv.New32a()
	_, _ = h.Write([]byte("(string)" + data))
	return uint64(h.Sum32())
}

// Get returns a copy of the pod's entry.
func (s *ResourceState) Get(uid types.UID) (PodResourceInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info, ok := s.entries[uid]
	return info.deepCopy(), ok
}

// Container returns the resources recorded for a container of the pod.
func (s *ResourceState) Container(uid types.UID, name string) (v1.ResourceRequirements, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.entries[uid].ContainerResources[name]
	return *r.DeepCopy(), ok
}

// PodLevel returns the pod-level resources recorded for the pod (nil when it
// has none) and whether the pod has an entry at all.
func (s *ResourceState) PodLevel(uid types.UID) (*v1.ResourceRequirements, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info, ok := s.entries[uid]
	return info.PodLevelResources.DeepCopy(), ok
}

// SetPodLevel records the pod's pod-level resources (nil: none) and saves
// the file.
func (s *ResourceState) SetPodLevel(uid types.UID, r *v1.ResourceRequirements) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := s.entries[uid]
	info.PodLevelResources = r.DeepCopy()
	s.entries[uid] = info
	return s.saveLocked()
}

// Set records the pod's entry and saves the file.
func (s *ResourceState) Set(uid types.UID, info PodResourceInfo) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries[uid] = info.deepCopy()
	return s.saveLocked()
}

// SetContainer records one container's resources and saves the file.
func (s *ResourceState) SetContainer(uid types.UID, name string, r v1.ResourceRequirements) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := s.entries[uid]
	if info.ContainerResources == nil {
		info.ContainerResources = map[string]v1.ResourceRequirements{}
	}
	info.ContainerResources[name] = *r.DeepCopy()
	s.entries[uid] = info
	return s.saveLocked()
}

// Remove drops the pod's entry and saves the file.
func (s *ResourceState) Remove(uid types.UID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.entries[uid]; !ok {
		return nil
	}
	delete(s.entries, uid)
	return s.saveLocked()
}

// RemoveOrphans drops the entries of pods keep does not report, and saves.
func (s *ResourceState) RemoveOrphans(keep func(types.UID) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for uid := range s.entries {
		if !keep(uid) {
			delete(s.entries, uid)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return s.saveLocked()
}

// saveLocked writes the file unless it already holds this state.
func (s *ResourceState) saveLocked() error {
	out, sum, err := encodeResourceState(s.entries)
	if err != nil {
		return fmt.Errorf("encode %s: %w", s.path, err)
	}
	if sum == s.saved {
		return nil
	}
	if err := writeFileAtomic(s.path, out); err != nil {
		return err
	}
	s.saved = sum
	return nil
}

// writeFileAtomic writes data to path through a synced temp file in the same
// directory.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}

func (info PodResourceInfo) deepCopy() PodResourceInfo {
	out := PodResourceInfo{}
	if info.ContainerResources != nil {
		out.ContainerResources = make(map[string]v1.ResourceRequirements, len(info.ContainerResources))
		for k, v := range info.ContainerResources {
			out.ContainerResources[k] = *v.DeepCopy()
		}
	}
	if info.PodLevelResources != nil {
		out.PodLevelResources = info.PodLevelResources.DeepCopy()
	}
	if info.EmptyDirVolumeLimits != nil {
		out.EmptyDirVolumeLimits = make(map[string]*resource.Quantity, len(info.EmptyDirVolumeLimits))
		for k, v := range info.EmptyDirVolumeLimits {
			if v != nil {
				q := v.DeepCopy()
				v = &q
			}
			out.EmptyDirVolumeLimits[k] = v
		}
	}
	return out
}

// CPUMemoryEqual reports whether two containers' cpu and memory requests and
// limits are the same (what a resize can change).
func CPUMemoryEqual(a, b v1.ResourceRequirements) bool {
	for _, pair := range [][2]v1.ResourceList{{a.Requests, b.Requests}, {a.Limits, b.Limits}} {
		for _, res := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			x, xok := pair[0][res]
			y, yok := pair[1][res]
			if xok != yok || (xok && !x.Equal(y)) {
				return false
			}
		}
	}
	return true
}

// ResourceInfoForPod is what the state files record for a pod: the resources
// of its init and regular containers (not ephemeral ones), and its pod-level
// resources when set.
func ResourceInfoForPod(pod *v1.Pod) PodResourceInfo {
	info := PodResourceInfo{ContainerResources: map[string]v1.ResourceRequirements{}}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			info.ContainerResources[list[i].Name] = *list[i].Resources.DeepCopy()
		}
	}
	if pod.Spec.Resources != nil {
		info.PodLevelResources = pod.Spec.Resources.DeepCopy()
	}
	return info
}

// PodCgroupResources are a pod cgroup's values for an in-place resize; nil
// fields are unknown or left alone. CPUQuota and Memory are -1 for no limit.
type PodCgroupResources struct {
	CPUShares *uint64
	CPUQuota  *int64
	CPUPeriod *uint64
	Memory    *int64
	// MemoryUsage is the cgroup's current usage in bytes (read only).
	MemoryUsage int64
}

// ContainerResourcesStatus is a running container's resources for its API
// status (upstream's convertContainerStatusResources): the allocated
// resources, with the cpu and memory the runtime reports where the allocation
// has them (memory requests are not reported: they stay as allocated; cpu
// values at the runtime's minimum keep the allocated value).
func ContainerResourcesStatus(allocated v1.ResourceRequirements, cs *ContainerStatus) *v1.ResourceRequirements {
	out := allocated.DeepCopy()
	if cs == nil || cs.State != StateRunning || cs.Resources.GetLinux() == nil {
		return out
	}
	lr := cs.Resources.GetLinux()
	if q, ok := out.Limits[v1.ResourceCPU]; ok && lr.CpuPeriod > 0 && lr.CpuQuota > 0 {
		got := lr.CpuQuota * 1000 / lr.CpuPeriod
		if !(got <= minMilliCPULimit && q.MilliValue() <= minMilliCPULimit) {
			out.Limits[v1.ResourceCPU] = *resource.NewMilliQuantity(got, resource.DecimalSI)
		}
	}
	if _, ok := out.Limits[v1.ResourceMemory]; ok && lr.MemoryLimitInBytes > 0 {
		out.Limits[v1.ResourceMemory] = *resource.NewQuantity(lr.MemoryLimitInBytes, resource.BinarySI)
	}
	if q, ok := out.Requests[v1.ResourceCPU]; ok && lr.CpuShares > 0 {
		got := (lr.CpuShares*1000 + 1023) / 1024
		if !(lr.CpuShares <= minShares && q.MilliValue() <= minShares) {
			out.Requests[v1.ResourceCPU] = *resource.NewMilliQuantity(got, resource.DecimalSI)
		}
	}
	return out
}

// The runtime minimums below which a reported cpu value says nothing of the
// allocation (upstream's).
const (
	minMilliCPULimit = 10
	minShares        = 2
)
