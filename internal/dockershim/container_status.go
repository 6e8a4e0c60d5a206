package dockershim

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// The reasons of a container that exited other than by completing.
const (
	reasonOOMKilled = "OOMKilled"
	reasonError     = "Error"
)

// logFlushWait bounds how long ContainerStatus waits for an exited container's last
// output to reach its CRI log.
const logFlushWait = 2 * time.Second

// ContainerStatus reports a container: state, timestamps, exit code and reason
// (OOMKilled, Error or Completed), image and image ID, mounts, log path, resources.
func (s *Service) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	j, err := s.inspect(ctx, "container_id", req.GetContainerId(), typeContainer)
	if err != nil {
		return nil, err
	}
	st := containerStatusFromJSON(j)
	s.noteKernelOOMKill(st)
	st.Image.Image, st.ImageRef = s.imageOf(ctx, j.Image, st.Image.Image, time.Now())
	if st.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		wctx, cancel := context.WithTimeout(ctx, logFlushWait)
		_ = s.logs.Wait(wctx, j.ID)
		cancel()
	}
	resp := &runtimeapi.ContainerStatusResponse{Status: st}
	if req.GetVerbose() {
		b, _ := json.Marshal(map[string]any{"pid": pidOf(j), "sandboxID": j.Config.Labels[labelSandboxID], "config": j.Config, "hostConfig": j.HostConfig})
		resp.Info = map[string]string{"info": string(b)}
	}
	return resp, nil
}

// containerStatus is ContainerStatus's status alone (used by container events).
func (s *Service) containerStatus(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	j, err := s.inspect(ctx, "container_id", id, typeContainer)
	if err != nil {
		return nil, err
	}
	st := containerStatusFromJSON(j)
	s.noteKernelOOMKill(st)
	st.Image.Image, st.ImageRef = s.imageOf(ctx, j.Image, st.Image.Image, time.Now())
	return st, nil
}

// noteKernelOOMKill reports as OOMKilled an exit Docker calls an error when the
// kernel logged an OOM kill of one of the container's tasks. Docker learns of
// OOM kills from containerd, whose runc shim starts watching the container's
// memory cgroup only after the process runs: a container that runs out of
// memory at once is killed unseen (one in fifty of a 16Mi hog under load, here)
// and would show "Error" and exit code 137 for good.
func (s *Service) noteKernelOOMKill(st *runtimeapi.ContainerStatus) {
	if s.oomLog == nil || st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.Reason != reasonError {
		return
	}
	if s.oomLog.Killed(st.Id) {
		st.Reason = reasonOOMKilled
	}
}

// containerStatusesOfSandbox returns the status of every container of a sandbox.
func (s *Service) containerStatusesOfSandbox(ctx context.Context, sandboxID string) ([]*runtimeapi.ContainerStatus, error) {
	cs, err := s.listManaged(ctx, typeContainer, labelSandboxID+"="+sandboxID)
	if err != nil {
		return nil, fmt.Errorf("list containers of sandbox %s: %w", sandboxID, err)
	}
	out := make([]*runtimeapi.ContainerStatus, 0, len(cs))
	for _, c := range cs {
		st, err := s.containerStatus(ctx, c.ID)
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, st)
	}
	return out, nil
}

// containerStatusFromJSON builds the CRI status of a container from Docker's inspect.
func containerStatusFromJSON(j libdocker.ContainerJSON) *runtimeapi.ContainerStatus {
	labels, annotations := splitLabels(j.Config.Labels)
	st := &runtimeapi.ContainerStatus{
		Id:          j.ID,
		Metadata:    containerMetadataOf(j.Name, j.Config.Labels),
		Image:       &runtimeapi.ImageSpec{Image: imageNameOf(j), UserSpecifiedImage: userSpecifiedImage(j.Config.Labels)},
		ImageRef:    j.Image,
		ImageId:     j.Image,
		CreatedAt:   parseDockerTime(j.Created),
		Labels:      labels,
		Annotations: annotations,
		LogPath:     j.Config.Labels[labelLogPath],
		Mounts:      mountsOf(j),
		Resources:   resourcesOf(j.HostConfig),
	}
	fillState(st, j.State)
	return st
}

// fillState maps Docker's state onto CRI state, timestamps, exit code and reason.
func fillState(st *runtimeapi.ContainerStatus, ds *libdocker.ContainerState) {
	if ds == nil {
		st.State = runtimeapi.ContainerState_CONTAINER_UNKNOWN
		return
	}
	st.StartedAt = parseDockerTime(ds.StartedAt)
	st.FinishedAt = parseDockerTime(ds.FinishedAt)
	if st.FinishedAt != 0 && st.FinishedAt < st.StartedAt {
		// Docker stamps StartedAt after the process runs; a process that exits at
		// once can look finished before it started.
		st.FinishedAt = st.StartedAt
	}
	switch {
	case ds.Running || ds.Paused || ds.Restarting:
		st.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	case ds.Status == "created" || (st.StartedAt == 0 && st.FinishedAt == 0 && ds.Error == ""):
		st.State = runtimeapi.ContainerState_CONTAINER_CREATED
	default:
		st.State = runtimeapi.ContainerState_CONTAINER_EXITED
		st.ExitCode = int32(ds.ExitCode)
		switch {
		case ds.OOMKilled:
			st.Reason = reasonOOMKilled
		case ds.ExitCode == 0:
			st.Reason = "Completed"
		default:
			st.Reason = reasonError
		}
		st.Message = ds.Error
		if st.StartedAt == 0 && ds.Error != "" {
			st.Reason = "ContainerCannotRun"
		}
	}
}

// imageNameOf is the image the container was created from, as the client named it.
func imageNameOf(j libdocker.ContainerJSON) string {
	if v := j.Config.Labels[labelImage]; v != "" {
		return v
	}
	return j.Config.Image
}

// containerMetadataOf reads the metadata label, falling back to the legacy name.
func containerMetadataOf(name string, labels map[string]string) *runtimeapi.ContainerMetadata {
	if m := containerMetadata(labels); m != nil {
		return m
	}
	if p, err := parseName(name); err == nil {
		return &runtimeapi.ContainerMetadata{Name: p.Container, Attempt: p.Attempt}
	}
	return &runtimeapi.ContainerMetadata{Name: name}
}

// mountsOf reports bind mounts.
func mountsOf(j libdocker.ContainerJSON) []*runtimeapi.Mount {
	var out []*runtimeapi.Mount
	for _, m := range j.Mounts {
		if m.Type != libdocker.MountTypeBind {
			continue
		}
		mt := &runtimeapi.Mount{ContainerPath: m.Destination, HostPath: m.Source, Readonly: !m.RW}
		switch m.Propagation {
		case libdocker.PropagationRSlave:
			mt.Propagation = runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
		case libdocker.PropagationRShared:
			mt.Propagation = runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
		}
		out = append(out, mt)
	}
	return out
}

// resourcesOf reports the container's current CPU and memory settings.
func resourcesOf(hc *libdocker.HostConfig) *runtimeapi.ContainerResources {
	if hc == nil {
		return nil
	}
	return &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{
		CpuPeriod: hc.CPUPeriod, CpuQuota: hc.CPUQuota, CpuShares: hc.CPUShares,
		MemoryLimitInBytes: hc.Memory, OomScoreAdj: int64(hc.OomScoreAdj),
		CpusetCpus: hc.CpusetCpus, CpusetMems: hc.CpusetMems, MemorySwapLimitInBytes: hc.MemorySwap,
	}}
}
