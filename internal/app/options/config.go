package options

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/blang/semver/v4"
	metricsapi "k8s.io/component-base/metrics/api/v1"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/kubelet-dockershim/kubelet/internal/app/kubeletconfig"
	"github.com/kubelet-dockershim/kubelet/internal/features"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/sysctl"
	"github.com/kubelet-dockershim/kubelet/internal/kuberuntime/pullmanager"
)

// Container runtimes --container-runtime accepts.
const (
	RuntimeDocker = "docker"
	RuntimeRemote = "remote"
)

// Config is the validated configuration of one kubelet process: the effective
// KubeletConfiguration (defaults < --config file < flags, applied once) plus the
// settings that exist only as flags.
type Config struct {
	Kubelet kubeletv1beta1.KubeletConfiguration

	ConfigFile string
	// ConfigDir is --config-dir: KubeletConfiguration drop-ins.
	ConfigDir               string
	ContainerRuntime        string
	ExperimentalDockershim  bool
	DockerEndpoint          string
	PodInfraContainerImage  string
	DockershimRootDirectory string
	// CRIDockerdRootDirectory is cri-dockerd's root directory, whose sandbox
	// checkpoints the shim reads when it adopts cri-dockerd's pods.
	CRIDockerdRootDirectory string
	// SeccompProfileRoot is the deprecated
	// --experimental-dockershim-seccomp-profile-root: accepted, acted on by
	// nothing (the shim reads a Localhost profile at the host path the CRI
	// names, anywhere).
	SeccompProfileRoot        string
	NetworkPlugin             string
	NetworkPluginMTU          int32
	CNIBinDir                 string
	CNIConfDir                string
	CNICacheDir               string
	ImagePullProgressDeadline time.Duration
	RuntimeCgroups            string
	StreamingAddress          string
	RootDirectory             string
	CertDirectory             string
	Kubeconfig                string
	BootstrapKubeconfig       string
	HostnameOverride          string
	NodeIP                    string
	NodeLabels                map[string]string
	CloudProvider             string
	// The image credential provider plugins (exec protocol).
	ImageCredentialProviderConfig string
	ImageCredentialProviderBinDir string
	LockFilePath                  string
	ExitOnLockContention          bool
	HousekeepingInterval          time.Duration
	// Deprecated upstream flags.
	ExperimentalAllocatableIgnoreEviction bool
	ExperimentalMounterPath               string
	// Verbosity is Kubelet.Logging.Verbosity as an int.
	Verbosity int
	// ShowVersion is --version: "true", "raw" or "" (run).
	ShowVersion string
	// ReportedVersion is the version the node reports (Version unless
	// --version=vX.Y.Z sets it).
	ReportedVersion string
	// fileFeatureGates are the config file's featureGates: --feature-gates
	// is merged over them (the flag wins per gate), as upstream.
	fileFeatureGates map[string]bool
	// skippedDropins are the --config-dir files without the .conf suffix.
	skippedDropins []string
	// The container GC policy (deprecated flags, no config field).
	MinimumGCAge            time.Duration
	MaxPerPodContainerCount int32
	MaxContainerCount       int32
}

// DefaultConfig returns the defaults of every flag-only setting and of the
// KubeletConfiguration.
func DefaultConfig() Config {
	c := Config{
		ContainerRuntime:          RuntimeDocker,
		DockerEndpoint:            "unix:///var/run/docker.sock",
		PodInfraContainerImage:    "registry.k8s.io/pause:3.10",
		DockershimRootDirectory:   "/var/lib/dockershim",
		CRIDockerdRootDirectory:   "/var/lib/cri-dockerd",
		NetworkPlugin:             "cni",
		CNIBinDir:                 "/opt/cni/bin",
		CNIConfDir:                "/etc/cni/net.d",
		CNICacheDir:               "/var/lib/cni/cache",
		ImagePullProgressDeadline: time.Minute,
		StreamingAddress:          "127.0.0.1",
		RootDirectory:             "/var/lib/kubelet",
		ReportedVersion:           Version,
		CertDirectory:             "/var/lib/kubelet/pki",
		HousekeepingInterval:      10 * time.Second,
		MaxPerPodContainerCount:   1,
		MaxContainerCount:         -1,
	}
	kubeletconfig.SetDefaults(&c.Kubelet)
	return c
}

// Validate checks the configuration; each error names the flag or config field.
func (c *Config) Validate() error {
	var errs []error
	switch c.ContainerRuntime {
	case RuntimeDocker, RuntimeRemote:
	default:
		errs = append(errs, fmt.Errorf("--container-runtime=%q is not supported (allowed: docker, remote)", c.ContainerRuntime))
	}
	switch c.NetworkPlugin {
	case "cni", "":
	case "kubenet":
		errs = append(errs, errors.New("--network-plugin=kubenet is not supported; use cni"))
	default:
		errs = append(errs, fmt.Errorf("--network-plugin=%q is not supported (allowed: cni)", c.NetworkPlugin))
	}
	if c.Verbosity < 0 {
		errs = append(errs, fmt.Errorf("-v=%d must not be negative", c.Verbosity))
	}
	if c.ImagePullProgressDeadline <= 0 {
		errs = append(errs, fmt.Errorf("--image-pull-progress-deadline=%s must be positive", c.ImagePullProgressDeadline))
	}
	for _, f := range []struct{ flag, v string }{
		{"--container-runtime-endpoint", c.Kubelet.ContainerRuntimeEndpoint}, {"--docker-endpoint", c.DockerEndpoint},
		{"--pod-infra-container-image", c.PodInfraContainerImage}, {"--experimental-dockershim-root-directory", c.DockershimRootDirectory},
		{"--cni-conf-dir", c.CNIConfDir}, {"--cni-bin-dir", c.CNIBinDir}, {"--root-dir", c.RootDirectory},
	} {
		if strings.TrimSpace(f.v) == "" {
			errs = append(errs, fmt.Errorf("%s must not be empty", f.flag))
		}
	}
	if c.NodeIP != "" {
		for _, ip := range strings.Split(c.NodeIP, ",") {
			if net.ParseIP(strings.TrimSpace(ip)) == nil {
				errs = append(errs, fmt.Errorf("--node-ip=%q is not an IP address", c.NodeIP))
			}
		}
	}
	if c.MinimumGCAge < 0 {
		errs = append(errs, fmt.Errorf("invalid minimum garbage collection age: %v", c.MinimumGCAge))
	}
	if _, err := c.StreamingListenAddr(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.checkFlagOnly()...)
	if err := kubeletconfig.Validate(&c.Kubelet); err != nil {
		errs = append(errs, err)
	}
	if v := c.Kubelet.ShowHiddenMetricsForVersion; v != "" {
		// Upstream's check against the binary's version: only the previous
		// minor version.
		if cur, err := semver.ParseTolerant(Version); err != nil {
			errs = append(errs, fmt.Errorf("showHiddenMetricsForVersion: this kubelet's version %q: %w", Version, err))
		} else if err := metricsapi.ValidateShowHiddenMetricsVersionForKubeletBackwardCompatOnly(cur, v); err != nil {
			errs = append(errs, err)
		}
	}
	if fg, err := c.FeatureGate(); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, validateImagePullCredentials(&c.Kubelet, fg.Enabled(features.KubeletEnsureSecretPulledImages))...)
		errs = append(errs, validateLogging(&c.Kubelet.Logging, fg)...)
		if len(c.Kubelet.DefaultPodSysctls) > 0 {
			if !fg.Enabled(features.DefaultPodSysctls) {
				errs = append(errs, errors.New("invalid configuration: DefaultPodSysctls feature gate is required for Kubelet configuration option defaultPodSysctls"))
			} else {
				errs = append(errs, sysctl.ValidateDefaults(c.Kubelet.DefaultPodSysctls)...)
			}
		}
	}
	return errors.Join(errs...)
}

// validateLogging is upstream's check of the logging configuration
// (vmodule for the text format only, its patterns, the alpha options behind
// LoggingAlphaOptions, flushFrequency); the format is checked with the
// other fields.
func validateLogging(c *logsapi.LoggingConfiguration, fg featuregate.FeatureGate) []error {
	var errs []error
	for _, e := range logsapi.Validate(c, fg, field.NewPath("logging")) {
		if e.Field != "logging.format" {
			errs = append(errs, e)
		}
	}
	return errs
}

// validateImagePullCredentials checks imagePullCredentialsVerificationPolicy and
// preloadedImagesVerificationAllowlist as upstream: with the
// KubeletEnsureSecretPulledImages gate, a known policy (empty: the default)
// and an allowlist only with NeverVerifyAllowlistedImages, of valid patterns;
// without it, neither set.
func validateImagePullCredentials(k *kubeletv1beta1.KubeletConfiguration, gate bool) []error {
	policy, allowlist := k.ImagePullCredentialsVerificationPolicy, k.PreloadedImagesVerificationAllowlist
	var errs []error
	if !gate {
		if policy != "" {
			errs = append(errs, errors.New("invalid configuration: `imagePullCredentialsVerificationPolicy` must not be set if KubeletEnsureSecretPulledImages feature gate is not enabled"))
		}
		if len(allowlist) > 0 {
			errs = append(errs, errors.New("invalid configuration: `preloadedImagesVerificationAllowlist` must not be set if KubeletEnsureSecretPulledImages feature gate is not enabled"))
		}
		return errs
	}
	switch policy {
	case "", kubeletv1beta1.NeverVerify, kubeletv1beta1.NeverVerifyPreloadedImages, kubeletv1beta1.NeverVerifyAllowlistedImages, kubeletv1beta1.AlwaysVerify:
	default:
		errs = append(errs, fmt.Errorf("invalid configuration: option %q specified for imagePullCredentialsVerificationPolicy. Valid options are %q, %q, %q or %q",
			policy, kubeletv1beta1.NeverVerify, kubeletv1beta1.NeverVerifyPreloadedImages, kubeletv1beta1.NeverVerifyAllowlistedImages, kubeletv1beta1.AlwaysVerify))
	}
	if len(allowlist) > 0 && policy != kubeletv1beta1.NeverVerifyAllowlistedImages {
		errs = append(errs, errors.New("invalid configuration: can't set `preloadedImagesVerificationAllowlist` if `imagePullCredentialsVertificationPolicy` is not \"NeverVerifyAllowlistedImages\""))
	} else if err := pullmanager.ValidateAllowlist(allowlist); err != nil {
		errs = append(errs, fmt.Errorf("invalid configuration: invalid image pattern in `preloadedImagesVerificationAllowlist`: %w", err))
	}
	return errs
}

// ApplyGateDefaults sets the defaults that depend on feature gates, as
// upstream's defaulting does: imagePullCredentialsVerificationPolicy is
// NeverVerifyPreloadedImages with KubeletEnsureSecretPulledImages.
func (c *Config) ApplyGateDefaults(fg featuregate.FeatureGate) {
	if fg.Enabled(features.KubeletEnsureSecretPulledImages) && c.Kubelet.ImagePullCredentialsVerificationPolicy == "" {
		c.Kubelet.ImagePullCredentialsVerificationPolicy = kubeletv1beta1.NeverVerifyPreloadedImages
	}
}

// FeatureGate is the upstream kubelet's gate set with featureGates (and
// --feature-gates) applied; an unknown gate or a change to a locked one is
// upstream's error.
func (c *Config) FeatureGate() (featuregate.FeatureGate, error) {
	fg, err := features.New()
	if err != nil {
		return nil, err
	}
	if err := fg.SetFromMap(c.Kubelet.FeatureGates); err != nil {
		return nil, fmt.Errorf("failed to set feature gates from initial flags-based config: %w", err)
	}
	return fg, nil
}

// ImageEndpoint is --image-service-endpoint, defaulting to the runtime endpoint.
func (c *Config) ImageEndpoint() string {
	if c.Kubelet.ImageServiceEndpoint != "" {
		return c.Kubelet.ImageServiceEndpoint
	}
	return c.Kubelet.ContainerRuntimeEndpoint
}

// StreamingListenAddr is --streaming-address as host:port (port 0 when only a host is
// given: the kernel picks one).
func (c *Config) StreamingListenAddr() (string, error) {
	a := c.StreamingAddress
	if _, _, err := net.SplitHostPort(a); err == nil {
		return a, nil
	}
	if net.ParseIP(strings.Trim(a, "[]")) == nil && a != "localhost" {
		return "", fmt.Errorf("--streaming-address=%q is not an IP address or host:port", a)
	}
	return net.JoinHostPort(strings.Trim(a, "[]"), "0"), nil
}

// CNIBinDirs splits --cni-bin-dir (comma separated, as the kubelet accepted).
func (c *Config) CNIBinDirs() []string {
	var out []string
	for _, d := range strings.Split(c.CNIBinDir, ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, d)
		}
	}
	return out
}

// ParseTaints parses --register-with-taints ("key=value:Effect" or "key:Effect", comma
// separated), as the kubelet does.
func ParseTaints(spec string) ([]v1.Taint, error) {
	var out []v1.Taint
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		kv, effect, ok := strings.Cut(item, ":")
		if !ok {
			return nil, fmt.Errorf("--register-with-taints: %q has no effect (want key=value:Effect)", item)
		}
		switch v1.TaintEffect(effect) {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("--register-with-taints: %q has an unknown effect %q", item, effect)
		}
		key, value, _ := strings.Cut(kv, "=")
		if key == "" {
			return nil, fmt.Errorf("--register-with-taints: %q has no key", item)
		}
		out = append(out, v1.Taint{Key: key, Value: value, Effect: v1.TaintEffect(effect)})
	}
	return out, nil
}

// checkFlagOnly reports the flag-only settings that are invalid.
func (c *Config) checkFlagOnly() []error {
	var errs []error
	if c.ExitOnLockContention && c.LockFilePath == "" {
		errs = append(errs, errors.New("cannot exit on lock file contention: no lock file specified"))
	}
	switch c.CloudProvider {
	case "", "external":
	default:
		// upstream's cloudprovider.ErrorForDisabledProvider
		errs = append(errs, fmt.Errorf("cloud provider %q was specified, but built-in cloud providers are disabled. Please set --cloud-provider=external and migrate to an external cloud provider", c.CloudProvider))
	}
	return errs
}

// SkippedDropins are the --config-dir files left out (no .conf suffix).
func (c *Config) SkippedDropins() []string { return c.skippedDropins }
