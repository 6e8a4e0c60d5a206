package dockershim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
)

// CRI's unified resources (cgroup v2 files, the kubelet's MemoryQoS
// memory.min, memory.low and memory.high) have no Docker field: the shim
// keeps a container's in a label (labelUnified) and writes them into its
// cgroup once it runs, as containerd's runc does at creation; an update
// writes them into the running container's cgroup.

// checkUnifiedHost refuses unified resources on a cgroup v1 host.
func (s *Service) checkUnifiedHost(field string) error {
	if s.host.cgroupVersion != "2" {
		return invalidArg(field, "unified resources need cgroup v2; Docker reports cgroup version %q", s.host.cgroupVersion)
	}
	return nil
}

// applyUnifiedLabel writes a started container's labelled unified resources.
func (s *Service) applyUnifiedLabel(ctx context.Context, id, label string) error {
	var kv map[string]string
	if err := json.Unmarshal([]byte(label), &kv); err != nil {
		return fmt.Errorf("container %s: label %s: %w", id, labelUnified, err)
	}
	j, err := s.docker.InspectContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("inspect started container %s: %w", id, err)
	}
	if j.State == nil || !j.State.Running {
		return nil // it exited already: no cgroup to set
	}
	return s.setUnified(id, j.State.Pid, kv)
}

// setUnified writes kv into the cgroup2 directory of process pid (container
// id's init process). A container that exited meanwhile is no error.
func (s *Service) setUnified(id string, pid int, kv map[string]string) error {
	p, err := s.stats.cgroups.lookup(pid)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // the process exited
	}
	if err != nil {
		return fmt.Errorf("container %s: find its cgroup: %w", id, err)
	}
	if !p.V2 {
		return fmt.Errorf("container %s: unified resources need cgroup v2, the container's cgroups are v1", id)
	}
	if err := cgroups.SetUnified(p.Unified, kv); err != nil && !errors.Is(err, cgroups.ErrGone) {
		return fmt.Errorf("container %s: %w", id, err)
	}
	return nil
}
