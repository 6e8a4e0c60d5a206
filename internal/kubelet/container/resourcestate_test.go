package container

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// upstreamAllocated is an allocated_pods_state written by upstream 1.37's
// types and checksum (one pod, a container with resources and one without).
const upstreamAllocated = `{"data":"{\"entries\":{\"0b6e4f2a-uid\":{\"ContainerResources\":{\"app\":{\"limits\":{\"cpu\":\"500m\",\"memory\":\"256Mi\"},\"requests\":{\"cpu\":\"100m\",\"memory\":\"128Mi\"}},\"sidecar\":{}},\"PodLevelResources\":null,\"EmptyDirVolumeLimits\":null}}}","checksum":523896364}`

func appResources() v1.ResourceRequirements {
	return v1.ResourceRequirements{
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("256Mi")},
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("128Mi")},
	}
}

// TestResourceStateIsUpstreams: upstream's file reads, and the same state
// writes byte for byte the same file.
func TestResourceStateIsUpstreams(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, AllocatedPodsStateFile), []byte(upstreamAllocated), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := OpenResourceState(dir, AllocatedPodsStateFile)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := s.Container("0b6e4f2a-uid", "app")
	if !ok || !r.Limits.Memory().Equal(resource.MustParse("256Mi")) || !r.Requests.Cpu().Equal(resource.MustParse("100m")) {
		t.Fatalf("app = %+v, %v", r, ok)
	}

	dir2 := t.TempDir()
	s2, err := OpenResourceState(dir2, AllocatedPodsStateFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Set("0b6e4f2a-uid", PodResourceInfo{ContainerResources: map[string]v1.ResourceRequirements{"app": appResources(), "sidecar": {}}}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir2, AllocatedPodsStateFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != upstreamAllocated {
		t.Errorf("written state\n%s\nwant upstream's\n%s", got, upstreamAllocated)
	}
}

func TestResourceStateCorruptAndRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := []byte(`{"data":"{}","checksum":1}`)
	if err := os.WriteFile(filepath.Join(dir, ActuatedPodsStateFile), bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenResourceState(dir, ActuatedPodsStateFile); err == nil {
		t.Fatal("a wrong checksum was accepted")
	}
	dir = t.TempDir()
	s, err := OpenResourceState(dir, ActuatedPodsStateFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetContainer("u1", "c", appResources()); err != nil {
		t.Fatal(err)
	}
	if err := s.SetContainer("u2", "c", v1.ResourceRequirements{}); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveOrphans(func(uid types.UID) bool { return uid == "u1" }); err != nil {
		t.Fatal(err)
	}
	again, err := OpenResourceState(dir, ActuatedPodsStateFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := again.Get("u2"); ok {
		t.Error("orphan u2 kept")
	}
	if r, ok := again.Container("u1", "c"); !ok || !r.Limits.Cpu().Equal(resource.MustParse("500m")) {
		t.Errorf("u1/c after reopening = %+v, %v", r, ok)
	}
	if err := again.Remove("u1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := again.Get("u1"); ok {
		t.Error("u1 kept after Remove")
	}
}

func TestResourceStatePodLevel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := OpenResourceState(dir, ActuatedPodsStateFile)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := s.PodLevel("u1"); ok || r != nil {
		t.Fatalf("PodLevel of an unknown pod = %+v, %v", r, ok)
	}
	if err := s.SetContainer("u1", "c", v1.ResourceRequirements{}); err != nil {
		t.Fatal(err)
	}
	if r, ok := s.PodLevel("u1"); !ok || r != nil {
		t.Fatalf("PodLevel of a pod without pod-level resources = %+v, %v; want nil, true", r, ok)
	}
	want := appResources()
	if err := s.SetPodLevel("u1", &want); err != nil {
		t.Fatal(err)
	}
	again, err := OpenResourceState(dir, ActuatedPodsStateFile)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := again.PodLevel("u1")
	if !ok || r == nil || !r.Limits.Memory().Equal(resource.MustParse("256Mi")) {
		t.Fatalf("PodLevel after reopening = %+v, %v", r, ok)
	}
	if _, ok := again.Container("u1", "c"); !ok {
		t.Error("SetPodLevel lost the container")
	}
	r.Limits[v1.ResourceMemory] = resource.MustParse("1Gi")
	if r2, _ := again.PodLevel("u1"); !r2.Limits.Memory().Equal(resource.MustParse("256Mi")) {
		t.Error("PodLevel returned the state's own copy")
	}
}
