package dockershim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/checkpoint"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/netns"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/network"
	"github.com/kubelet-dockershim/kubelet/internal/faultinject"
)

const (
	// sandboxOOMScoreAdj is the pause container's score, as the legacy dockershim set it
	// (clamped to what the host allows).
	sandboxOOMScoreAdj = -998
	// cleanupTimeout bounds rollback work that runs after the request ctx is gone.
	cleanupTimeout = 2 * time.Minute
)

// RunPodSandbox creates and starts a pod sandbox, in these steps:
//  1. validate the request (metadata, handler, features Docker cannot do);
//  2. ensureSandboxImage: pull the pause image when it is missing;
//  3. createSandboxContainer: the pause container with the pod's namespaces;
//  4. writeCheckpoint (before any network work, so a crash cannot leak an IP);
//  5. start the container and write the pod's resolv.conf;
//  6. setupNetwork: CNI ADD in the sandbox's netns; the IPs go into the checkpoint.
//
// Any failure rolls back what was done, with a context that outlives the request.
func (s *Service) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (_ *runtimeapi.RunPodSandboxResponse, retErr error) {
	cfg := req.GetConfig()
	if err := s.validateSandboxRequest(cfg, req.GetRuntimeHandler()); err != nil {
		return nil, err
	}
	if err := s.ensureSandboxImage(ctx); err != nil {
		return nil, err
	}
	id, err := s.createSandboxContainer(ctx, cfg, req.GetRuntimeHandler())
	if err != nil {
		return nil, err
	}
	log := s.logger.With(zap.String("sandbox", id), zap.String("pod", cfg.Metadata.Namespace+"/"+cfg.Metadata.Name))
	// The sandbox's container events reach GetContainerEvents clients only
	// once it is theirs: a failed set-up (a CNI ADD that fails) emits none,
	// so that an evented client does not retry at once, past its back-off.
	s.events.mute(id)
	defer func() {
		if retErr != nil {
			s.rollbackSandbox(ctx, log, id)
			s.events.unmute(id, failedSandboxMute)
			return
		}
		s.events.sandboxReady(id, sandboxEventLabels(cfg, sandboxName(cfg.Metadata), req.GetRuntimeHandler()))
	}()
	cp := newSandboxCheckpoint(id, cfg)
	if err := s.checkpoints.Write(cp); err != nil {
		return nil, fmt.Errorf("write checkpoint of sandbox %s: %w", id, err)
	}
	if err := s.docker.StartContainer(ctx, id); err != nil {
		return nil, fmt.Errorf("start sandbox container %s: %w", id, err)
	}
	if err := s.writeResolvConf(ctx, id, cfg.GetDnsConfig()); err != nil {
		return nil, err
	}
	if err := s.setupNetwork(ctx, cp, cfg); err != nil {
		return nil, err
	}
	log.Info("pod sandbox running", zap.Strings("ips", cp.IPs))
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

// validateSandboxRequest checks what Docker needs and refuses what it cannot do.
func (s *Service) validateSandboxRequest(cfg *runtimeapi.PodSandboxConfig, handler string) error {
	if cfg == nil {
		return invalidArg("config", "must be set")
	}
	if err := validateSandboxMetadata(cfg.Metadata); err != nil {
		return err
	}
	if err := s.validHandler("runtime_handler", handler); err != nil {
		return err
	}
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns.GetUsernsOptions() != nil && ns.GetUsernsOptions().GetMode() != runtimeapi.NamespaceMode_NODE {
		return unimplemented("user namespaces (config.linux.security_context.namespace_options.userns_options) are not supported by the Docker engine")
	}
	return nil
}

// ensureSandboxImage pulls the pause image when Docker does not have it (by its
// tag, digest or full ID: lookupImage).
func (s *Service) ensureSandboxImage(ctx context.Context) error {
	if _, found, err := s.lookupImage(ctx, s.podInfraImage); err != nil {
		return fmt.Errorf("inspect sandbox image %s: %w", s.podInfraImage, err)
	} else if found {
		return nil
	}
	var creds []*runtimeapi.AuthConfig
	if s.keyring != nil {
		creds, _ = s.keyring.Lookup(sandboxImageRepository(s.podInfraImage))
	}
	if len(creds) == 0 {
		creds = []*runtimeapi.AuthConfig{nil} // anonymous
	}
	var errs []error
	for _, c := range creds {
		auth, err := pullAuthConfig(c)
		if err == nil {
			if err = s.docker.PullImage(ctx, s.podInfraImage, auth); err == nil {
				return nil
			}
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("pull sandbox image %s: %w", s.podInfraImage, errors.Join(errs...))
}

// Keyring answers registry credentials for an image repository (e.g.
// registry.k8s.io/pause), most specific first.
type Keyring interface {
	Lookup(repository string) ([]*runtimeapi.AuthConfig, bool)
}

// sandboxImageRepository is the repository of an image reference, Docker
// Hub's normalised (docker.io/library/...), without tag or digest.
func sandboxImageRepository(ref string) string {
	name, _, _ := strings.Cut(ref, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	domain, rest, found := strings.Cut(name, "/")
	if !found || (!strings.ContainsAny(domain, ".:") && domain != "localhost") {
		domain, rest = "docker.io", name
	}
	if domain == "docker.io" && !strings.Contains(rest, "/") {
		rest = "library/" + rest
	}
	return domain + "/" + rest
}

// createSandboxContainer creates the pause container and returns its full ID.
func (s *Service) createSandboxContainer(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	cc, hc, err := s.sandboxContainerConfig(cfg, handler)
	if err != nil {
		return "", err
	}
	id, err := s.docker.CreateContainer(ctx, sandboxName(cfg.Metadata), cc, hc)
	if err != nil {
		if errors.Is(err, libdocker.ErrConflict) {
			return "", fmt.Errorf("%w: sandbox name %s is in use: %w", ErrAlreadyExists, sandboxName(cfg.Metadata), err)
		}
		return "", fmt.Errorf("create sandbox container: %w", err)
	}
	return id, nil
}

// sandboxEventLabels are the attributes Docker would give the sandbox's
// events: its labels and its container name.
func sandboxEventLabels(cfg *runtimeapi.PodSandboxConfig, name, handler string) map[string]string {
	internal, err := sandboxInternalLabels(cfg, handler)
	if err != nil {
		internal = map[string]string{labelType: typeSandbox}
	}
	attrs := makeLabels(cfg.Labels, cfg.Annotations, internal)
	attrs["name"] = name
	return attrs
}

// sandboxContainerConfig builds the pause container's Docker configuration.
func (s *Service) sandboxContainerConfig(cfg *runtimeapi.PodSandboxConfig, handler string) (*libdocker.ContainerConfig, *libdocker.HostConfig, error) {
	internal, err := sandboxInternalLabels(cfg, handler)
	if err != nil {
		return nil, nil, err
	}
	cc := &libdocker.ContainerConfig{
		Image:  s.podInfraImage,
		Labels: makeLabels(cfg.Labels, cfg.Annotations, internal),
	}
	hc := &libdocker.HostConfig{
		Runtime:   handler,
		LogConfig: libdocker.LogConfig{Type: "none"},
	}
	if err := s.applySandboxLinux(cfg, cc, hc); err != nil {
		return nil, nil, err
	}
	return cc, hc, nil
}

// sandboxInternalLabels are the shim's labels of a sandbox container.
func sandboxInternalLabels(cfg *runtimeapi.PodSandboxConfig, handler string) (map[string]string, error) {
	meta, err := encodeJSONLabel(cfg.Metadata)
	if err != nil {
		return nil, err
	}
	nsOpts, err := encodeJSONLabel(cfg.GetLinux().GetSecurityContext().GetNamespaceOptions())
	if err != nil {
		return nil, err
	}
	return map[string]string{
		labelType:          typeSandbox,
		labelMetadata:      meta,
		labelHandler:       handler,
		labelNamespaceOpts: nsOpts,
		labelHostNetwork:   fmt.Sprint(isHostNetwork(cfg)),
		labelLogDirectory:  cfg.GetLogDirectory(),
	}, nil
}

// isHostNetwork reports whether the pod uses the node's network namespace.
func isHostNetwork(cfg *runtimeapi.PodSandboxConfig) bool {
	return cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
}

// newSandboxCheckpoint records what teardown needs, before the network exists.
func newSandboxCheckpoint(id string, cfg *runtimeapi.PodSandboxConfig) *checkpoint.PodSandbox {
	cp := &checkpoint.PodSandbox{
		ID: id, Name: cfg.Metadata.Name, Namespace: cfg.Metadata.Namespace, UID: cfg.Metadata.Uid,
		HostNetwork: isHostNetwork(cfg), CreatedAt: time.Now(),
	}
	for _, pm := range cfg.PortMappings {
		cp.PortMappings = append(cp.PortMappings, checkpoint.PortMapping{
			Protocol: strings.ToLower(pm.Protocol.String()), ContainerPort: pm.ContainerPort, HostPort: pm.HostPort, HostIP: pm.HostIp,
		})
	}
	return cp
}

// setupNetwork runs CNI ADD for a non-host-network sandbox and records the IPs. The
// checkpoint is marked NetworkSetUp before ADD so that a crash mid-ADD still tears down.
func (s *Service) setupNetwork(ctx context.Context, cp *checkpoint.PodSandbox, cfg *runtimeapi.PodSandboxConfig) error {
	if cp.HostNetwork {
		return nil
	}
	j, err := s.docker.InspectContainer(ctx, cp.ID)
	if err != nil {
		return fmt.Errorf("inspect sandbox %s: %w", cp.ID, err)
	}
	if j.State == nil || j.State.Pid == 0 {
		return fmt.Errorf("sandbox %s has no running process", cp.ID)
	}
	cp.NetworkSetUp = true
	if err := s.checkpoints.Write(cp); err != nil {
		return fmt.Errorf("write checkpoint of sandbox %s: %w", cp.ID, err)
	}
	pod := networkPod(cp, s.pinNetNS(cp.ID, j.State.Pid))
	pod.DNS = cniDNS(cfg.GetDnsConfig())
	pod.Bandwidth = bandwidthFromAnnotations(cfg.Annotations)
	faultinject.Kill("dockershim.sandbox.before-cni-add")
	res, err := s.network.SetUpPod(ctx, pod)
	if err != nil {
		// SetUpPod already ran DEL; nothing of the network remains.
		cp.NetworkSetUp = false
		_ = s.checkpoints.Write(cp)
		s.unpinNetNS(cp.ID)
		return fmt.Errorf("set up network of pod %s/%s (sandbox %s): %w", cp.Namespace, cp.Name, cp.ID, err)
	}
	faultinject.Kill("dockershim.sandbox.after-cni-add")
	if err := s.forward.Allow(ctx, res.Subnets); err != nil {
		// Logged by the rules too; a host whose FORWARD policy accepts
		// needs none, so the pod still starts.
		s.logger.Warn("pod traffic may be dropped by the host's FORWARD chain", zap.String("sandbox", cp.ID), zap.Error(err))
	}
	cp.IPs = res.IPs
	if err := s.checkpoints.Write(cp); err != nil {
		return fmt.Errorf("write checkpoint of sandbox %s: %w", cp.ID, err)
	}
	return nil
}

// pinNetNS bind-mounts the network namespace of the sandbox's pause process
// (package netns says why) and returns the path CNI gets; if that fails, the
// process's own /proc path.
func (s *Service) pinNetNS(id string, pid int) string {
	path, err := s.pins.Pin(id, pid)
	if err == nil {
		return path
	}
	if !errors.Is(err, netns.ErrUnsupported) {
		s.logger.Warn("pinning the sandbox's network namespace failed: if its pause process dies before CNI DEL, plugins that look inside the namespace (bridge's ipMasq) cannot clean up",
			zap.String("sandbox", id), zap.Error(err))
	}
	return fmt.Sprintf("/proc/%d/ns/net", pid)
}

// unpinNetNS releases the pinned namespace of a sandbox (logged on failure:
// Start removes the pins of sandboxes that are gone).
func (s *Service) unpinNetNS(id string) {
	if err := s.pins.Unpin(id); err != nil {
		s.logger.Warn("unpin the sandbox's network namespace", zap.String("sandbox", id), zap.Error(err))
	}
}

// removeOrphanPins unpins the namespaces of sandboxes that have no checkpoint
// (removed while the shim was down, or the shim killed between pinning and
// its checkpoint's removal).
func (s *Service) removeOrphanPins() {
	ids, err := s.pins.List()
	if err != nil {
		s.logger.Warn("list pinned network namespaces", zap.Error(err))
		return
	}
	for _, id := range ids {
		if _, err := s.checkpoints.Read(id); errors.Is(err, checkpoint.ErrNotFound) {
			s.unpinNetNS(id)
		}
	}
}

// networkPod describes a sandbox to the network plugin from its checkpoint.
func networkPod(cp *checkpoint.PodSandbox, netns string) network.Pod {
	pod := network.Pod{ID: cp.ID, Name: cp.Name, Namespace: cp.Namespace, UID: cp.UID, NetNS: netns}
	for _, pm := range cp.PortMappings {
		if pm.HostPort > 0 {
			pod.PortMappings = append(pod.PortMappings, network.PortMapping{
				HostPort: pm.HostPort, ContainerPort: pm.ContainerPort, Protocol: pm.Protocol, HostIP: pm.HostIP,
			})
		}
	}
	return pod
}

// cniDNS passes the pod's DNS config as the CNI dns capability.
func cniDNS(d *runtimeapi.DNSConfig) *network.DNS {
	if d == nil {
		return nil
	}
	return &network.DNS{Servers: d.Servers, Searches: d.Searches, Options: d.Options}
}

// writeResolvConf replaces the resolv.conf Docker made for the sandbox (shared by all
// its containers) with the pod's DNS config.
func (s *Service) writeResolvConf(ctx context.Context, id string, d *runtimeapi.DNSConfig) error {
	if d == nil || len(d.Servers)+len(d.Searches)+len(d.Options) == 0 {
		return nil
	}
	j, err := s.docker.InspectContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("inspect sandbox %s: %w", id, err)
	}
	if j.ResolvConfPath == "" {
		return fmt.Errorf("sandbox %s has no resolv.conf path", id)
	}
	if err := os.WriteFile(j.ResolvConfPath, []byte(resolvConf(d)), 0o644); err != nil {
		return fmt.Errorf("write resolv.conf of sandbox %s: %w", id, err)
	}
	return nil
}

// resolvConf renders a DNS config in resolv.conf syntax.
func resolvConf(d *runtimeapi.DNSConfig) string {
	var b strings.Builder
	for _, srv := range d.Servers {
		b.WriteString("nameserver " + srv + "\n")
	}
	if len(d.Searches) > 0 {
		b.WriteString("search " + strings.Join(d.Searches, " ") + "\n")
	}
	if len(d.Options) > 0 {
		b.WriteString("options " + strings.Join(d.Options, " ") + "\n")
	}
	return b.String()
}

// rollbackSandbox undoes a failed RunPodSandbox: network, container, checkpoint.
func (s *Service) rollbackSandbox(ctx context.Context, log *zap.Logger, id string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := s.teardownNetwork(cctx, id, sandboxRuntime{}); err != nil {
		log.Error("rollback: tear down network", zap.Error(err))
		return // keep container and checkpoint so StopPodSandbox can retry
	}
	if err := s.docker.RemoveContainer(cctx, id); err != nil && !errors.Is(err, libdocker.ErrNotFound) {
		log.Error("rollback: remove sandbox container", zap.Error(err))
	}
	if err := s.checkpoints.Delete(id); err != nil {
		log.Error("rollback: delete checkpoint", zap.Error(err))
	}
}
