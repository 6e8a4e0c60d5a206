package dockershim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/checkpoint"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// PodSandboxStatus reports a sandbox. Its IPs come from the checkpoint written at
// RunPodSandbox (the CNI ADD result); no process is ever executed to find them.
func (s *Service) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	j, err := s.inspect(ctx, "pod_sandbox_id", req.GetPodSandboxId(), typeSandbox)
	if err != nil {
		return nil, err
	}
	st := s.sandboxStatusFromJSON(ctx, j)
	resp := &runtimeapi.PodSandboxStatusResponse{Status: st}
	if req.GetVerbose() {
		resp.Info = sandboxVerboseInfo(j)
	}
	if req.GetVerbose() {
		cs, err := s.containerStatusesOfSandbox(ctx, j.ID)
		if err != nil {
			return nil, err
		}
		resp.ContainersStatuses = cs
	}
	return resp, nil
}

// sandboxStatus is PodSandboxStatus's status alone (used by container events).
func (s *Service) sandboxStatus(ctx context.Context, id string) (*runtimeapi.PodSandboxStatus, error) {
	j, err := s.inspect(ctx, "pod_sandbox_id", id, typeSandbox)
	if err != nil {
		return nil, err
	}
	return s.sandboxStatusFromJSON(ctx, j), nil
}

// sandboxStatusFromJSON builds the CRI status of a sandbox container.
func (s *Service) sandboxStatusFromJSON(ctx context.Context, j libdocker.ContainerJSON) *runtimeapi.PodSandboxStatus {
	labels, annotations := splitLabels(j.Config.Labels)
	st := &runtimeapi.PodSandboxStatus{
		Id:             j.ID,
		Metadata:       sandboxMetadataOf(j.Name, j.Config.Labels),
		State:          runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
		CreatedAt:      parseDockerTime(j.Created),
		Labels:         labels,
		Annotations:    annotations,
		RuntimeHandler: j.Config.Labels[labelHandler],
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{
			Options: sandboxNamespaceOptions(j),
		}},
	}
	if j.State != nil && j.State.Running {
		st.State = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	st.Network = s.sandboxNetworkStatus(ctx, j)
	return st
}

// sandboxNetworkStatus returns the pod IPs recorded in the checkpoint (a
// sandbox another runtime created is adopted first); host-network pods
// report none (the kubelet uses the node IP).
func (s *Service) sandboxNetworkStatus(ctx context.Context, j libdocker.ContainerJSON) *runtimeapi.PodSandboxNetworkStatus {
	if sandboxUsesHostNetwork(j) {
		if foreign(j.Config.Labels) {
			// Adopted all the same: the containers this shim starts in it
			// are then its own (their logs are resumed after a restart).
			if _, err := s.sandboxCheckpoint(ctx, j); err != nil {
				s.logger.Warn("adopt sandbox", zap.String("sandbox", j.ID), zap.Error(err))
			}
		}
		return &runtimeapi.PodSandboxNetworkStatus{}
	}
	cp, err := s.sandboxCheckpoint(ctx, j)
	if err != nil {
		if !errors.Is(err, checkpoint.ErrNotFound) {
			s.logger.Warn("read sandbox checkpoint", zap.String("sandbox", j.ID), zap.Error(err))
		}
		return &runtimeapi.PodSandboxNetworkStatus{}
	}
	return podNetworkStatus(cp.IPs)
}

// podNetworkStatus turns a primary-first IP list into the CRI network status.
func podNetworkStatus(ips []string) *runtimeapi.PodSandboxNetworkStatus {
	ns := &runtimeapi.PodSandboxNetworkStatus{}
	if len(ips) == 0 {
		return ns
	}
	ns.Ip = ips[0]
	for _, ip := range ips[1:] {
		ns.AdditionalIps = append(ns.AdditionalIps, &runtimeapi.PodIP{Ip: ip})
	}
	return ns
}

// sandboxMetadataOf reads the metadata label, falling back to the legacy name.
func sandboxMetadataOf(name string, labels map[string]string) *runtimeapi.PodSandboxMetadata {
	if m := sandboxMetadata(labels); m != nil {
		return m
	}
	p, err := parseName(name)
	if err != nil {
		return &runtimeapi.PodSandboxMetadata{Name: name}
	}
	return &runtimeapi.PodSandboxMetadata{Name: p.Pod, Namespace: p.Namespace, Uid: p.UID, Attempt: p.Attempt}
}

// sandboxVerboseInfo is the "info" map of a verbose status: Docker's view as JSON.
func sandboxVerboseInfo(j libdocker.ContainerJSON) map[string]string {
	b, err := json.Marshal(map[string]any{"pid": pidOf(j), "image": j.Image, "config": j.Config, "hostConfig": j.HostConfig})
	if err != nil {
		return map[string]string{"info": fmt.Sprintf("{\"error\":%q}", err.Error())}
	}
	return map[string]string{"info": string(b)}
}

func pidOf(j libdocker.ContainerJSON) int {
	if j.State == nil {
		return 0
	}
	return j.State.Pid
}
