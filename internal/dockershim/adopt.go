package dockershim

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/checkpoint"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/netns"
)

// Sandboxes that cri-dockerd or the 1.23 in-tree dockershim created are
// adopted, not recreated, when this shim takes over a node: their Docker
// names and labels are the ones this shim reads already, but their
// checkpoints hold no IP (and live in cri-dockerd's root directory, or in
// this shim's own in the 1.23 format). On the first question about such a
// sandbox, adoptSandbox writes this shim's checkpoint for it: the pod IP from
// libcni's cached ADD result (else the sandbox's eth0), the port mappings
// from the foreign checkpoint, host network from Docker. From then on it is
// one of this shim's sandboxes, and its teardown sends the CNI DEL that
// releases the IP and the host port rules.

// foreign reports whether another runtime created a Docker object.
func foreign(labels map[string]string) bool { return labels[labelManaged] != "true" }

// sandboxUsesHostNetwork reports whether a sandbox container shares the
// node's network namespace: this shim's label, or Docker's network mode for
// sandboxes other runtimes created (they set no label).
func sandboxUsesHostNetwork(j libdocker.ContainerJSON) bool {
	if j.Config != nil && !foreign(j.Config.Labels) {
		return j.Config.Labels[labelHostNetwork] == "true"
	}
	hc := hostConfigOf(j)
	return hc != nil && hc.NetworkMode.IsHost()
}

// hostConfigOf is a container's HostConfig, nil when Docker gave none.
func hostConfigOf(j libdocker.ContainerJSON) *libdocker.HostConfig {
	if j.ContainerJSONBase == nil {
		return nil
	}
	return j.HostConfig
}

// sandboxNamespaceOptions is a sandbox's namespace modes: this shim's label,
// or for other runtimes' sandboxes what they report, read from Docker's
// modes (network and IPC: node or pod; PID: node or container).
func sandboxNamespaceOptions(j libdocker.ContainerJSON) *runtimeapi.NamespaceOption {
	hc := hostConfigOf(j)
	if j.Config == nil || !foreign(j.Config.Labels) || hc == nil {
		var labels map[string]string
		if j.Config != nil {
			labels = j.Config.Labels
		}
		return namespaceOptions(labels)
	}
	mode := func(host bool, otherwise runtimeapi.NamespaceMode) runtimeapi.NamespaceMode {
		if host {
			return runtimeapi.NamespaceMode_NODE
		}
		return otherwise
	}
	return &runtimeapi.NamespaceOption{
		Network: mode(hc.NetworkMode.IsHost(), runtimeapi.NamespaceMode_POD),
		Pid:     mode(hc.PidMode.IsHost(), runtimeapi.NamespaceMode_CONTAINER),
		Ipc:     mode(hc.IpcMode.IsHost(), runtimeapi.NamespaceMode_POD),
	}
}

// sandboxCheckpoint returns the checkpoint of a sandbox container, adopting
// the sandbox first when another runtime created it and this shim has no
// checkpoint of its own (or only a 1.23 one in its directory). Errors wrap
// checkpoint.ErrNotFound when there is nothing to read or adopt.
func (s *Service) sandboxCheckpoint(ctx context.Context, j libdocker.ContainerJSON) (*checkpoint.PodSandbox, error) {
	if j.ContainerJSONBase == nil {
		return nil, fmt.Errorf("sandbox checkpoint: %w: Docker gave no container details", checkpoint.ErrNotFound)
	}
	cp, err := s.checkpoints.Read(j.ID)
	if !adoptable(j, err) {
		return cp, err
	}
	// One adoption at a time per sandbox (the kubelet's relist and its pod
	// worker ask at once): the second finds the first's checkpoint, rather
	// than reading it as a corrupt 1.23 one and losing the port mappings.
	unlock := s.adoptLocks.lock(j.ID)
	defer unlock()
	if cp, err = s.checkpoints.Read(j.ID); !adoptable(j, err) {
		return cp, err
	}
	return s.adoptSandbox(ctx, j)
}

// adoptable reports whether a sandbox needs adopting: another runtime made
// it and this shim has no checkpoint of its own for it (none, or a 1.23 one).
func adoptable(j libdocker.ContainerJSON, readErr error) bool {
	return readErr != nil && j.Config != nil && foreign(j.Config.Labels) &&
		(errors.Is(readErr, checkpoint.ErrNotFound) || errors.Is(readErr, checkpoint.ErrCorrupt))
}

// adoptSandbox writes this shim's checkpoint for a sandbox another runtime
// created and returns it. A running pod-network sandbox whose IP was found
// nowhere is not written (the next question tries again) but returned, so
// that a teardown still sends the DEL.
func (s *Service) adoptSandbox(ctx context.Context, j libdocker.ContainerJSON) (*checkpoint.PodSandbox, error) {
	meta := sandboxMetadataOf(j.Name, j.Config.Labels)
	if meta.Namespace == "" || meta.Uid == "" {
		return nil, fmt.Errorf("sandbox %s: %w: %q is not a Kubernetes sandbox name", j.ID, checkpoint.ErrNotFound, j.Name)
	}
	cp := &checkpoint.PodSandbox{
		ID: j.ID, Name: meta.Name, Namespace: meta.Namespace, UID: meta.Uid,
		HostNetwork: sandboxUsesHostNetwork(j),
	}
	if t, err := time.Parse(time.RFC3339Nano, j.Created); err == nil {
		cp.CreatedAt = t
	}
	log := s.logger.With(zap.String("sandbox", j.ID), zap.String("pod", meta.Namespace+"/"+meta.Name))
	origin := "another runtime"
	if legacy, dir := s.legacyCheckpoint(j.ID); legacy != nil {
		origin = fmt.Sprintf("%s (checkpoint in %s)", legacy.Origin, dir)
		cp.PortMappings = legacy.PortMappings
	}
	if !cp.HostNetwork {
		// Set up as far as anyone knows: a later DEL of a network that was
		// never added is harmless, a skipped one leaks the IP.
		cp.NetworkSetUp = true
		cp.IPs = s.adoptedIPs(ctx, j, log)
		if len(cp.IPs) == 0 && j.State != nil && j.State.Running {
			return cp, nil
		}
	}
	if err := s.checkpoints.Write(cp); err != nil {
		return nil, fmt.Errorf("adopt sandbox %s: %w", j.ID, err)
	}
	log.Info("adopted a sandbox another runtime created", zap.String("from", origin),
		zap.Strings("ips", cp.IPs), zap.Bool("hostNetwork", cp.HostNetwork), zap.Int("portMappings", len(cp.PortMappings)))
	return cp, nil
}

// adoptedIPs finds the pod IPs of a foreign sandbox: libcni's cached ADD
// result, else the global addresses of eth0 in its running namespace (where
// cri-dockerd and the 1.23 dockershim read them).
func (s *Service) adoptedIPs(ctx context.Context, j libdocker.ContainerJSON, log *zap.Logger) []string {
	ips, cacheErr := s.network.CachedIPs(ctx, j.ID)
	if cacheErr == nil {
		return ips
	}
	if j.State == nil || !j.State.Running || j.State.Pid <= 0 {
		log.Warn("adopted sandbox: no pod IP in libcni's cache and the sandbox is not running", zap.Error(cacheErr))
		return nil
	}
	ips, err := netns.GlobalAddrs(fmt.Sprintf("/proc/%d/ns/net", j.State.Pid), "eth0")
	if err != nil || len(ips) == 0 {
		log.Warn("adopted sandbox: no pod IP found", zap.NamedError("cache", cacheErr), zap.NamedError("netns", err))
		return nil
	}
	return ips
}

// legacyCheckpoint reads the checkpoint cri-dockerd or the 1.23 dockershim
// wrote for a sandbox: in cri-dockerd's directory, or in this shim's own
// (the 1.23 default was the same). A corrupt one is logged and skipped.
func (s *Service) legacyCheckpoint(id string) (*checkpoint.Legacy, string) {
	for _, dir := range s.legacyDirs {
		l, err := checkpoint.ReadLegacy(filepath.Join(dir, id))
		if err == nil {
			return l, dir
		}
		if !errors.Is(err, checkpoint.ErrNotFound) {
			s.logger.Warn("a foreign sandbox checkpoint was not used", zap.String("sandbox", id), zap.Error(err))
		}
	}
	return nil, ""
}
