package dockershim

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

const (
	// runtimeName is what Version reports; the kubelet shows docker://<version>.
	runtimeName = "docker"
	// criAPIVersion is the CRI version this shim serves.
	criAPIVersion = "v1"
	// defaultHandler is the runtime handler of pods that name none.
	defaultHandler = "runc"
)

// hostInfo holds facts read from Docker and the host once, at Start.
type hostInfo struct {
	dockerVersion  string
	apiVersion     string
	cgroupDriver   string
	cgroupVersion  string
	runtimes       []string // runtime handlers Docker knows
	defaultRuntime string
	minOOMScoreAdj int      // lowest oom_score_adj this host lets us set
	missingCaps    []string // capabilities outside the host's bounding set
	// daemonBoundsCaps: Docker itself keeps privileged and ALL within its own
	// capabilities (libdocker.DaemonBoundsCapabilities).
	daemonBoundsCaps bool
	imageFsPath      string
	// cdiSpecDirs are where Docker reads CDI specs; none when the engine
	// has no CDI (before 25, or without features.cdi).
	cdiSpecDirs []string
}

// readHostInfo asks Docker for its version and info and probes the OOM score floor.
func (s *Service) readHostInfo(ctx context.Context) (hostInfo, error) {
	v, err := s.docker.Version(ctx)
	if err != nil {
		return hostInfo{}, fmt.Errorf("read docker version: %w", err)
	}
	info, err := s.docker.Info(ctx)
	if err != nil {
		return hostInfo{}, fmt.Errorf("read docker info: %w", err)
	}
	h := hostInfo{
		dockerVersion:    v.Version,
		apiVersion:       v.APIVersion,
		cgroupDriver:     info.CgroupDriver,
		cgroupVersion:    info.CgroupVersion,
		defaultRuntime:   info.DefaultRuntime,
		minOOMScoreAdj:   detectMinOOMScoreAdj(s.logger),
		missingCaps:      detectMissingCaps(s.logger),
		daemonBoundsCaps: libdocker.DaemonBoundsCapabilities(v.APIVersion),
		imageFsPath:      info.DockerRootDir,
		cdiSpecDirs:      info.CDISpecDirs,
	}
	for name := range info.Runtimes {
		h.runtimes = append(h.runtimes, name)
	}
	sort.Strings(h.runtimes)
	if h.cgroupDriver == "" {
		h.cgroupDriver = "cgroupfs"
	}
	return h, nil
}

// validHandler checks a runtime handler against the runtimes Docker knows; "" means the
// default.
func (s *Service) validHandler(field, h string) error {
	if h == "" {
		return nil
	}
	for _, r := range s.host.runtimes {
		if r == h {
			return nil
		}
	}
	return invalidArg(field, "unknown runtime handler %q (docker knows %s)", h, strings.Join(s.host.runtimes, ", "))
}

// Version returns the runtime name and Docker's version.
func (s *Service) Version(ctx context.Context, _ *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	v, err := s.docker.Version(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0",
		RuntimeName:       runtimeName,
		RuntimeVersion:    v.Version,
		RuntimeApiVersion: criAPIVersion,
	}, nil
}

// Status reports RuntimeReady (Docker answers) and NetworkReady (a CNI config is loaded).
func (s *Service) Status(ctx context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	runtimeReady := &runtimeapi.RuntimeCondition{Type: runtimeapi.RuntimeReady, Status: true}
	if err := s.docker.Ping(ctx); err != nil {
		runtimeReady.Status = false
		runtimeReady.Reason = "DockerDaemonNotReady"
		runtimeReady.Message = err.Error()
	}
	networkReady := &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Status: true}
	if err := s.network.Status(); err != nil {
		networkReady.Status = false
		networkReady.Reason = "NetworkPluginNotReady"
		networkReady.Message = "docker: network plugin is not ready: " + err.Error()
	}
	resp := &runtimeapi.StatusResponse{
		Status:          &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{runtimeReady, networkReady}},
		RuntimeHandlers: s.runtimeHandlers(),
		Features:        &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: false},
	}
	if req.GetVerbose() {
		resp.Info = map[string]string{"config": fmt.Sprintf(`{"dockerVersion":%q,"apiVersion":%q,"cgroupDriver":%q,"minOOMScoreAdj":%d,"podInfraImage":%q}`,
			s.host.dockerVersion, s.host.apiVersion, s.host.cgroupDriver, s.host.minOOMScoreAdj, s.podInfraImage)}
	}
	return resp, nil
}

// runtimeHandlers lists Docker's runtimes; the default one is also served as "".
func (s *Service) runtimeHandlers() []*runtimeapi.RuntimeHandler {
	features := &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: false, UserNamespaces: false}
	out := []*runtimeapi.RuntimeHandler{{Name: "", Features: features}}
	for _, r := range s.host.runtimes {
		out = append(out, &runtimeapi.RuntimeHandler{Name: r, Features: features})
	}
	return out
}

// RuntimeConfig reports Docker's cgroup driver, which the kubelet must match.
func (s *Service) RuntimeConfig(_ context.Context, _ *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	driver := runtimeapi.CgroupDriver_CGROUPFS
	if s.host.cgroupDriver == "systemd" {
		driver = runtimeapi.CgroupDriver_SYSTEMD
	}
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: driver}}, nil
}

// runtimeConfig holds what UpdateRuntimeConfig sets.
type runtimeConfig struct {
	mu      sync.Mutex
	podCIDR string
}

// UpdateRuntimeConfig records the pod CIDR the kubelet hands down. With CNI the network
// config owns address allocation, so the CIDR is only logged and kept for Status.
func (s *Service) UpdateRuntimeConfig(_ context.Context, req *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	cidr := req.GetRuntimeConfig().GetNetworkConfig().GetPodCidr()
	s.runConfig.mu.Lock()
	changed := cidr != s.runConfig.podCIDR
	s.runConfig.podCIDR = cidr
	s.runConfig.mu.Unlock()
	if changed && cidr != "" {
		s.logger.Info("pod CIDR updated", zap.String("pod-cidr", cidr))
	}
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}
