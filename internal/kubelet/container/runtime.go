package container

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerID is a runtime-qualified container ID, printed as "<type>://<id>".
type ContainerID struct {
	Type string // the runtime name from Version, e.g. "docker" or "containerd"
	ID   string
}

func (c ContainerID) String() string {
	if c.ID == "" {
		return ""
	}
	return c.Type + "://" + c.ID
}

// IsEmpty reports whether the ID is unset.
func (c ContainerID) IsEmpty() bool { return c.ID == "" }

// ParseContainerID parses "<type>://<id>".
func ParseContainerID(s string) (ContainerID, error) {
	t, id, ok := strings.Cut(s, "://")
	if !ok || t == "" || id == "" {
		return ContainerID{}, fmt.Errorf("invalid container ID %q", s)
	}
	return ContainerID{Type: t, ID: id}, nil
}

// State is a container's runtime state.
type State string

const (
	StateCreated State = "created"
	StateRunning State = "running"
	StateExited  State = "exited"
	StateUnknown State = "unknown"
)

// StateFromCRI maps the CRI container state.
func StateFromCRI(s runtimeapi.ContainerState) State {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return StateCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return StateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return StateExited
	}
	return StateUnknown
}

// Container is a container as GetPods lists it.
type Container struct {
	ID      ContainerID
	Name    string
	Image   string
	ImageID string
	Hash    uint64
	State   State
}

// Pod is a pod as the runtime knows it (GetPods), grouped from its sandboxes and
// containers by pod UID.
type Pod struct {
	ID         types.UID
	Name       string
	Namespace  string
	CreatedAt  uint64
	Containers []*Container
	Sandboxes  []*Container
}

// IsEmpty reports whether the runtime has nothing of the pod.
func (p *Pod) IsEmpty() bool { return p == nil || len(p.Containers)+len(p.Sandboxes) == 0 }

// ContainerStatus is one container's status from the runtime.
type ContainerStatus struct {
	ID                     ContainerID
	Name                   string
	State                  State
	CreatedAt              time.Time
	StartedAt              time.Time
	FinishedAt             time.Time
	ExitCode               int
	Image                  string
	ImageID                string // the image ID the runtime reports (image_id/image_ref)
	ImageRef               string
	Hash                   uint64 // hash of the v1.Container spec it was created from
	RestartCount           int
	Reason                 string
	Message                string
	Resources              *runtimeapi.ContainerResources
	SandboxID              string
	TerminationMessagePath string
}

// PodStatus is the runtime's view of one pod: its sandboxes (newest first) and every
// container of it, newest first.
type PodStatus struct {
	ID                types.UID
	Name              string
	Namespace         string
	IPs               []string
	ContainerStatuses []*ContainerStatus
	SandboxStatuses   []*runtimeapi.PodSandboxStatus
	// TimeStamp is when the status was read (PLEG cache freshness).
	TimeStamp time.Time
}

// FindContainerStatusByName returns the newest status of the named container, or nil.
func (s *PodStatus) FindContainerStatusByName(name string) *ContainerStatus {
	if s == nil {
		return nil
	}
	for _, c := range s.ContainerStatuses {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// ContainerStatusesByName returns every status (newest first) of the named container.
func (s *PodStatus) ContainerStatusesByName(name string) []*ContainerStatus {
	var out []*ContainerStatus
	if s == nil {
		return nil
	}
	for _, c := range s.ContainerStatuses {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}
