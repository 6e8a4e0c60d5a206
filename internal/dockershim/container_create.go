package dockershim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// CreateContainer creates a container in a sandbox, in these steps:
//  1. validate the request and refuse features Docker cannot do;
//  2. resolve the sandbox (full ID, its namespaces), a PID namespace target
//     (a container of the same sandbox) and the image (its full ID);
//  3. build the Docker config (command, env, mounts, security, resources,
//     namespaces), with the image as its ID;
//  4. create it under the legacy k8s_ name, with labels that rebuild all state.
func (s *Service) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	cfg, sbCfg := req.GetConfig(), req.GetSandboxConfig()
	if err := validateContainerRequest(cfg, sbCfg); err != nil {
		return nil, err
	}
	sb, err := s.inspect(ctx, "pod_sandbox_id", req.GetPodSandboxId(), typeSandbox)
	if err != nil {
		return nil, err
	}
	// The log directory is the sandbox's own, given at RunPodSandbox (a
	// sandbox another shim created carries no record of it).
	if dir, ok := sb.Config.Labels[labelLogDirectory]; ok && dir != sbCfg.GetLogDirectory() {
		return nil, invalidArg("sandbox_config.log_directory", "%q is not the log directory of sandbox %s", sbCfg.GetLogDirectory(), sb.ID)
	}
	pidTarget, err := s.checkPIDTarget(ctx, cfg, sb.ID)
	if err != nil {
		return nil, err
	}
	imageID, err := s.containerImage(ctx, cfg.Image.Image)
	if err != nil {
		return nil, err
	}
	cc, hc, err := s.containerConfig(cfg, sbCfg, &sb)
	if err != nil {
		return nil, err
	}
	cc.Image = imageID   // the image checked, not whatever Docker resolves the reference to later
	if pidTarget != "" { // the container checked, not whatever Docker resolves the ID to later
		hc.PidMode = libdocker.PidMode("container:" + pidTarget)
	}
	id, err := s.docker.CreateContainer(ctx, containerName(cfg.Metadata, sbCfg.Metadata), cc, hc)
	if err != nil {
		if errors.Is(err, libdocker.ErrConflict) {
			return nil, fmt.Errorf("%w: container name %s is in use: %w", ErrAlreadyExists, containerName(cfg.Metadata, sbCfg.Metadata), err)
		}
		return nil, fmt.Errorf("create container: %w", err)
	}
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

// containerImage returns the full ID of the image a container is created from.
// The reference must name a present image by its full ID, a tag or a digest
// (lookupImage): anything else, an ID prefix Docker would resolve included, is
// NotFound.
func (s *Service) containerImage(ctx context.Context, ref string) (string, error) {
	ii, found, err := s.lookupImage(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("inspect config.image.image %q: %w", ref, err)
	}
	if !found {
		return "", fmt.Errorf("%w: config.image.image %q is not present (pull it first)", ErrNotFound, ref)
	}
	return ii.ID, nil
}

// checkPIDTarget lets a container join the PID namespace of a target (pid
// mode TARGET, as kubectl debug --target does) only when the target is a
// container of the same sandbox (Docker would join any container's). It
// returns the target's full ID ("" without pid mode TARGET).
func (s *Service) checkPIDTarget(ctx context.Context, cfg *runtimeapi.ContainerConfig, sandboxID string) (string, error) {
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns.GetPid() != runtimeapi.NamespaceMode_TARGET {
		return "", nil
	}
	const field = "config.linux.security_context.namespace_options.target_id"
	if ns.GetTargetId() == "" {
		return "", invalidArg(field, "must be set with pid mode TARGET")
	}
	target, err := s.inspect(ctx, field, ns.GetTargetId(), typeContainer)
	if err != nil {
		return "", err
	}
	if target.Config.Labels[labelSandboxID] != sandboxID {
		return "", invalidArg(field, "%q is not a container of sandbox %s", ns.GetTargetId(), sandboxID)
	}
	return target.ID, nil
}

// validateContainerRequest checks required fields and unsupported features.
func validateContainerRequest(cfg *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig) error {
	if cfg == nil {
		return invalidArg("config", "must be set")
	}
	if err := validateContainerMetadata(cfg.Metadata); err != nil {
		return err
	}
	if cfg.GetImage().GetImage() == "" {
		return invalidArg("config.image.image", "must not be empty")
	}
	if sbCfg == nil {
		return invalidArg("sandbox_config", "must be set")
	}
	if err := validateSandboxMetadata(sbCfg.Metadata); err != nil {
		return fmt.Errorf("sandbox_config: %w", err)
	}
	for i, m := range cfg.Mounts {
		if err := validateMount(fmt.Sprintf("config.mounts[%d]", i), m); err != nil {
			return err
		}
	}
	return nil
}

// validateMount refuses mounts the Docker engine cannot make.
func validateMount(field string, m *runtimeapi.Mount) error {
	switch {
	case m.GetImage().GetImage() != "":
		return unimplemented("%s: image volumes are not supported by the Docker engine in use", field)
	case m.RecursiveReadOnly:
		return unimplemented("%s: recursive read-only mounts are not supported by the Docker engine", field)
	case len(m.UidMappings)+len(m.GidMappings) > 0:
		return unimplemented("%s: id-mapped mounts are not supported by the Docker engine", field)
	case m.ContainerPath == "":
		return invalidArg(field+".container_path", "must not be empty")
	case m.HostPath == "":
		return invalidArg(field+".host_path", "must not be empty")
	case !filepath.IsAbs(m.HostPath):
		// Docker would take a relative bind source for a named volume.
		return invalidArg(field+".host_path", "%q must be an absolute path", m.HostPath)
	case !filepath.IsAbs(m.ContainerPath):
		return invalidArg(field+".container_path", "%q must be an absolute path", m.ContainerPath)
	}
	return nil
}

// containerConfig builds the Docker configuration of a container.
func (s *Service) containerConfig(cfg *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig, sb *libdocker.ContainerJSON) (*libdocker.ContainerConfig, *libdocker.HostConfig, error) {
	logPath := ""
	if sbCfg.LogDirectory != "" && cfg.LogPath != "" {
		logPath = filepath.Join(sbCfg.LogDirectory, cfg.LogPath)
	}
	meta, err := encodeJSONLabel(cfg.Metadata)
	if err != nil {
		return nil, nil, err
	}
	internal := map[string]string{
		labelType: typeContainer, labelSandboxID: sb.ID, labelLogPath: logPath,
		labelMetadata: meta, labelImage: cfg.Image.Image,
	}
	if logPath != "" {
		internal[labelLogDirectory] = sbCfg.LogDirectory
	}
	if u := cfg.Image.GetUserSpecifiedImage(); u != "" {
		internal[labelUserImage] = u
	}
	if unified := cfg.GetLinux().GetResources().GetUnified(); len(unified) > 0 {
		if err := s.checkUnifiedHost("config.linux.resources.unified"); err != nil {
			return nil, nil, err
		}
		if internal[labelUnified], err = encodeJSONLabel(unified); err != nil {
			return nil, nil, err
		}
	}
	cc := &libdocker.ContainerConfig{
		Image:        cfg.Image.Image,
		Entrypoint:   cfg.Command,
		Cmd:          cfg.Args,
		Env:          envList(cfg.Envs),
		WorkingDir:   cfg.WorkingDir,
		Labels:       makeLabels(cfg.Labels, cfg.Annotations, internal),
		Tty:          cfg.Tty,
		OpenStdin:    cfg.Stdin,
		StdinOnce:    cfg.StdinOnce,
		AttachStdin:  cfg.Stdin,
		AttachStdout: true,
		AttachStderr: true,
	}
	binds, apiMounts, err := hostMounts(cfg.Mounts)
	if err != nil {
		return nil, nil, err
	}
	hc := &libdocker.HostConfig{
		Binds:   binds,
		Mounts:  apiMounts,
		Runtime: sb.HostConfig.Runtime,
	}
	if err := s.applyContainerLinux(cfg, sbCfg, sb, cc, hc); err != nil {
		return nil, nil, err
	}
	return cc, hc, nil
}

// envList renders CRI env vars as KEY=value.
func envList(envs []*runtimeapi.KeyValue) []string {
	out := make([]string, 0, len(envs))
	for _, e := range envs {
		out = append(out, e.Key+"="+string(e.Value))
	}
	return out
}

// hostMounts renders the CRI mounts for Docker: as binds
// ("host:container:opts", where Docker creates a missing host directory, as
// the legacy dockershim relied on), except mounts whose paths hold ':' or ','
// (which the bind string cannot carry): those go through Docker's Mounts API,
// their missing source created as a directory first, as containerd's CRI does.
func hostMounts(mounts []*runtimeapi.Mount) (binds []string, apiMounts []libdocker.Mount, err error) {
	for _, m := range mounts {
		if !strings.ContainsAny(m.HostPath+m.ContainerPath, ":,") {
			binds = append(binds, bindString(m))
			continue
		}
		am, err := apiMount(m)
		if err != nil {
			return nil, nil, err
		}
		apiMounts = append(apiMounts, am)
	}
	return binds, apiMounts, nil
}

// bindString renders one mount as a Docker bind.
func bindString(m *runtimeapi.Mount) string {
	var opts []string
	if m.Readonly {
		opts = append(opts, "ro")
	}
	if m.SelinuxRelabel {
		opts = append(opts, "Z")
	}
	switch m.Propagation {
	case runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER:
		opts = append(opts, "rslave")
	case runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL:
		opts = append(opts, "rshared")
	}
	b := m.HostPath + ":" + m.ContainerPath
	if len(opts) > 0 {
		b += ":" + strings.Join(opts, ",")
	}
	return b
}

// apiMount renders one mount for Docker's Mounts API, creating a missing
// source directory. The Mounts API has no SELinux relabel option: on a host
// with SELinux enabled a relabel request is refused rather than dropped.
func apiMount(m *runtimeapi.Mount) (libdocker.Mount, error) {
	if m.SelinuxRelabel && selinuxEnabled() {
		return libdocker.Mount{}, unimplemented("mount %q: SELinux relabeling of a path with ':' or ',' is not supported by the Docker engine", m.HostPath)
	}
	if err := os.MkdirAll(m.HostPath, 0o755); err != nil {
		return libdocker.Mount{}, fmt.Errorf("create mount source %s: %w", m.HostPath, err)
	}
	am := libdocker.Mount{Type: libdocker.MountTypeBind, Source: m.HostPath, Target: m.ContainerPath, ReadOnly: m.Readonly}
	switch m.Propagation {
	case runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER:
		am.BindOptions = &libdocker.BindOptions{Propagation: libdocker.PropagationRSlave}
	case runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL:
		am.BindOptions = &libdocker.BindOptions{Propagation: libdocker.PropagationRShared}
	}
	return am, nil
}

// selinuxEnabled reports whether the host has SELinux mounted.
func selinuxEnabled() bool {
	_, err := os.Stat("/sys/fs/selinux/enforce")
	return err == nil
}

// ensureLogFile creates a container's CRI log file (and its directory) before the
// container starts, as containerd does: a reader may open it as soon as
// StartContainer returns, before the log copier wrote a line. Below the
// kubelet's log root everything is created and opened through an os.Root
// opened on it, following no symbolic link, so that a link planted in the
// path (by a pod or log agent that can write there) cannot lead the file
// elsewhere; outside it, below the sandbox's log directory dir when known.
func ensureLogFile(logs logFollower, dir, path string) error {
	if path == "" {
		return nil
	}
	return logs.CreateLogFile(dir, path)
}
