// Package kubeletconfig reads, defaults and validates a KubeletConfiguration
// (kubelet.config.k8s.io/v1beta1) as upstream's kubelet 1.37 does, with its
// messages. It does no I/O but Load's read of the file; internal/app uses it.
package kubeletconfig

import (
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	tracingapi "k8s.io/component-base/tracing/api/v1"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/cpuset"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

const (
	kubeletConfigAPIVersion = "kubelet.config.k8s.io/v1beta1"
	kubeletConfigKind       = "KubeletConfiguration"
	// DefaultRuntimeEndpoint is where the built-in dockershim serves.
	DefaultRuntimeEndpoint = "unix:///var/run/dockershim.sock"
)

// Load reads a KubeletConfiguration strictly: a wrong apiVersion or
// kind, or an unknown field, is an error naming the file and the field.
func Load(path string) (*kubeletv1beta1.KubeletConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	cfg, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	return cfg, nil
}

// Decode decodes a KubeletConfiguration file's content strictly.
func Decode(data []byte) (*kubeletv1beta1.KubeletConfiguration, error) {
	var cfg kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return nil, err
	}
	if cfg.APIVersion != kubeletConfigAPIVersion || cfg.Kind != kubeletConfigKind {
		return nil, fmt.Errorf("apiVersion/kind is %q/%q, want %s/%s", cfg.APIVersion, cfg.Kind, kubeletConfigAPIVersion, kubeletConfigKind)
	}
	return &cfg, nil
}

func dur(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

// SetDefaults applies the upstream v1beta1 defaults (those of the kubelet
// this binary replaces) to every field still unset; the runtime endpoint defaults to
// the built-in dockershim.
func SetDefaults(c *kubeletv1beta1.KubeletConfiguration) {
	c.APIVersion, c.Kind = kubeletConfigAPIVersion, kubeletConfigKind
	setDefault(&c.EnableServer, true)
	setZero(&c.SyncFrequency, dur(time.Minute))
	setZero(&c.FileCheckFrequency, dur(20*time.Second))
	setZero(&c.HTTPCheckFrequency, dur(20*time.Second))
	setZero(&c.Address, "0.0.0.0")
	setZero(&c.Port, 10250)
	setDefault(&c.Authentication.Anonymous.Enabled, false)
	setDefault(&c.Authentication.Webhook.Enabled, true)
	setZero(&c.Authentication.Webhook.CacheTTL, dur(2*time.Minute))
	setZero(&c.Authorization.Mode, kubeletv1beta1.KubeletAuthorizationModeWebhook)
	setZero(&c.Authorization.Webhook.CacheAuthorizedTTL, dur(5*time.Minute))
	setZero(&c.Authorization.Webhook.CacheUnauthorizedTTL, dur(30*time.Second))
	setDefault(&c.RegistryPullQPS, 5)
	setZero(&c.RegistryBurst, 10)
	setDefault(&c.EventRecordQPS, 50)
	setZero(&c.EventBurst, 100)
	setDefault(&c.EnableDebuggingHandlers, true)
	setDefault(&c.HealthzPort, 10248)
	setZero(&c.HealthzBindAddress, "127.0.0.1")
	setDefault(&c.OOMScoreAdj, -999)
	setZero(&c.StreamingConnectionIdleTimeout, dur(4*time.Hour))
	setZero(&c.NodeStatusUpdateFrequency, dur(10*time.Second))
	setZero(&c.NodeStatusReportFrequency, dur(5*time.Minute))
	setZero(&c.NodeLeaseDurationSeconds, 40)
	setZero(&c.ImageMinimumGCAge, dur(2*time.Minute))
	setDefault(&c.ImageGCHighThresholdPercent, 85)
	setDefault(&c.ImageGCLowThresholdPercent, 80)
	setZero(&c.VolumeStatsAggPeriod, dur(time.Minute))
	setDefault(&c.CgroupsPerQOS, true)
	setZero(&c.CgroupDriver, "cgroupfs")
	setZero(&c.CPUManagerPolicy, "none")
	setZero(&c.CPUManagerReconcilePeriod, dur(10*time.Second))
	setZero(&c.MemoryManagerPolicy, "None")
	setZero(&c.TopologyManagerPolicy, "none")
	setZero(&c.TopologyManagerScope, "container")
	// Upstream's default is true (refuse cgroup v1); this kubelet runs Docker
	// hosts, many still on cgroup v1, so it stays false unless set.
	setDefault(&c.FailCgroupV1, false)
	setZero(&c.RuntimeRequestTimeout, dur(2*time.Minute))
	setZero(&c.HairpinMode, kubeletv1beta1.PromiscuousBridge)
	setZero(&c.MaxPods, 110)
	setDefault(&c.PodPidsLimit, -1)
	setDefault(&c.ResolverConfig, "/etc/resolv.conf")
	setDefault(&c.CPUCFSQuota, true)
	setDefault(&c.CPUCFSQuotaPeriod, dur(100*time.Millisecond))
	setDefault(&c.NodeStatusMaxImages, 50)
	setZero(&c.MaxOpenFiles, 1000000)
	setZero(&c.ContentType, "application/vnd.kubernetes.protobuf")
	setDefault(&c.KubeAPIQPS, 50)
	setZero(&c.KubeAPIBurst, 100)
	setDefault(&c.SerializeImagePulls, true)
	setZero(&c.EvictionPressureTransitionPeriod, dur(5*time.Minute))
	setDefault(&c.MergeDefaultEvictionSettings, false)
	setDefault(&c.LocalStorageCapacityIsolation, true)
	setDefault(&c.EnableControllerAttachDetach, true)
	setDefault(&c.MakeIPTablesUtilChains, true)
	setDefault(&c.IPTablesMasqueradeBit, 14)
	setDefault(&c.IPTablesDropBit, 15)
	setDefault(&c.FailSwapOn, true)
	setZero(&c.ContainerLogMaxSize, "10Mi")
	setDefault(&c.ContainerLogMaxFiles, 5)
	setDefault(&c.ContainerLogMaxWorkers, 1)
	setDefault(&c.ContainerLogMonitorInterval, dur(10*time.Second))
	setZero(&c.ConfigMapAndSecretChangeDetectionStrategy, kubeletv1beta1.WatchChangeDetectionStrategy)
	if c.EnforceNodeAllocatable == nil {
		c.EnforceNodeAllocatable = []string{"pods"}
	}
	setZero(&c.VolumePluginDir, "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/")
	logsapi.SetRecommendedLoggingConfiguration(&c.Logging)
	setDefault(&c.EnableSystemLogHandler, true)
	setDefault(&c.EnableProfilingHandler, true)
	setDefault(&c.EnableDebugFlagsHandler, true)
	setDefault(&c.SeccompDefault, false)
	setDefault(&c.MemoryThrottlingFactor, 0.9)
	setDefault(&c.RegisterNode, true)
	setDefault(&c.LocalStorageCapacityIsolation, true)
	setZero(&c.PodLogsDir, "/var/log/pods")
	setZero(&c.ContainerRuntimeEndpoint, DefaultRuntimeEndpoint)
}

// setZero sets *p to v when it holds its zero value.
func setZero[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// setDefault sets a pointer field to v when it is nil.
func setDefault[T any](p **T, v T) {
	if *p == nil {
		*p = ptr.To(v)
	}
}

// Validate checks the fields this kubelet uses; errors name the field.
func Validate(c *kubeletv1beta1.KubeletConfiguration) error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	for _, d := range []struct {
		field string
		v     metav1.Duration
	}{
		{"syncFrequency", c.SyncFrequency}, {"fileCheckFrequency", c.FileCheckFrequency},
		{"httpCheckFrequency", c.HTTPCheckFrequency}, {"runtimeRequestTimeout", c.RuntimeRequestTimeout},
		{"nodeStatusUpdateFrequency", c.NodeStatusUpdateFrequency},
	} {
		if d.v.Duration <= 0 {
			add(d.field, "must be positive, got %s", d.v.Duration)
		}
	}
	for _, e := range tracingapi.ValidateTracingConfiguration(c.Tracing, nil, field.NewPath("tracing")) {
		errs = append(errs, e)
	}
	if c.CgroupDriver != "cgroupfs" && c.CgroupDriver != "systemd" {
		add("cgroupDriver", "%q is not cgroupfs or systemd", c.CgroupDriver)
	}
	if err := checkQOSReserved(c.QOSReserved); err != nil {
		errs = append(errs, fmt.Errorf("--qos-reserved value failed to parse: %w", err))
	}
	switch c.MemorySwap.SwapBehavior { // NodeSwap is locked on in 1.37
	case "", "NoSwap", "LimitedSwap":
	default:
		errs = append(errs, fmt.Errorf("invalid configuration: memorySwap.swapBehavior %q must be one of: \"\", %q or %q",
			c.MemorySwap.SwapBehavior, "LimitedSwap", "NoSwap"))
	}
	// Upstream only checks hairpinMode since the dockershim left it (the
	// network plugin decides; here the CNI configuration's hairpinMode).
	switch c.HairpinMode {
	case "none", "hairpin-veth", "promiscuous-bridge":
	default:
		errs = append(errs, fmt.Errorf("invalid configuration: option %q specified for hairpinMode (--hairpin-mode). Valid options are %q, %q or %q",
			c.HairpinMode, "none", "hairpin-veth", "promiscuous-bridge"))
	}
	// Upstream only checks these two (kube-proxy owns the marks now).
	if b := c.IPTablesDropBit; b != nil && (*b < 0 || *b > 31) {
		errs = append(errs, fmt.Errorf("invalid configuration: iptablesDropBit (--iptables-drop-bit) %v must be between 0 and 31, inclusive", *b))
	}
	if b := c.IPTablesMasqueradeBit; b != nil && (*b < 0 || *b > 31) {
		errs = append(errs, fmt.Errorf("invalid configuration: iptablesMasqueradeBit (--iptables-masquerade-bit) %v must be between 0 and 31, inclusive", *b))
	}
	switch c.TopologyManagerPolicy {
	case "none", "best-effort", "restricted", "single-numa-node":
	default:
		errs = append(errs, fmt.Errorf("invalid configuration: topologyManagerPolicy (--topology-manager-policy) %q must be one of: %q",
			c.TopologyManagerPolicy, []string{"none", "best-effort", "restricted", "single-numa-node"}))
	}
	if c.TopologyManagerScope != "container" && c.TopologyManagerScope != "pod" {
		errs = append(errs, fmt.Errorf("invalid configuration: topologyManagerScope (--topology-manager-scope) %q must be one of: \"container\", or \"pod\"",
			c.TopologyManagerScope))
	}
	if c.MaxPods <= 0 {
		add("maxPods", "must be positive, got %d", c.MaxPods)
	}
	if q, err := resource.ParseQuantity(c.ContainerLogMaxSize); err != nil || q.Value() <= 0 {
		add("containerLogMaxSize", "%q is not a positive quantity", c.ContainerLogMaxSize)
	}
	if *c.ContainerLogMaxFiles < 2 {
		add("containerLogMaxFiles", "must be at least 2, got %d", *c.ContainerLogMaxFiles)
	}
	if c.StaticPodPath != "" && !filepath.IsAbs(c.StaticPodPath) {
		add("staticPodPath", "%q must be an absolute path", c.StaticPodPath)
	}
	for i, ip := range c.ClusterDNS {
		if net.ParseIP(ip) == nil {
			add(fmt.Sprintf("clusterDNS[%d]", i), "%q is not an IP address", ip)
		}
	}
	if p := *c.HealthzPort; p < 0 || p > 65535 {
		add("healthzPort", "%d is not a port", p)
	}
	if c.HealthzBindAddress != "" && net.ParseIP(c.HealthzBindAddress) == nil {
		add("healthzBindAddress", "%q is not an IP address", c.HealthzBindAddress)
	}
	if c.Logging.Format != "text" && c.Logging.Format != "json" {
		add("logging.format", "%q is not text or json", c.Logging.Format)
	}
	errs = append(errs, validateTLSConfig(c)...)
	if n := c.MaxParallelImagePulls; n != nil {
		switch {
		case *n < 1:
			errs = append(errs, fmt.Errorf("invalid configuration: maxParallelImagePulls %v must be a positive number", *n))
		case *c.SerializeImagePulls && *n > 1:
			errs = append(errs, errors.New("invalid configuration: maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls (--serialize-image-pulls) is set to false"))
		}
	}
	if p := c.CrashLoopBackOff.MaxContainerRestartPeriod; p != nil && (p.Duration < time.Second || p.Duration > 300*time.Second) {
		errs = append(errs, fmt.Errorf("invalid configuration: CrashLoopBackOff.MaxContainerRestartPeriod (got: %v seconds) must be set between 1s and 300s", p.Seconds()))
	}
	if *c.ContainerLogMaxWorkers < 1 {
		errs = append(errs, errors.New("invalid configuration: containerLogMaxWorkers must be greater than or equal to 1"))
	}
	if c.ContainerLogMonitorInterval.Duration < 3*time.Second {
		errs = append(errs, errors.New("invalid configuration: containerLogMonitorInterval must be a positive time duration greater than or equal to 3s"))
	}
	if c.PodsPerCore < 0 {
		errs = append(errs, fmt.Errorf("invalid configuration: podsPerCore (--pods-per-core) %v must not be a negative number", c.PodsPerCore))
	}
	errs = append(errs, validateNodeAllocatableConfig(c)...)
	errs = append(errs, validateGCConfig(c)...)
	errs = append(errs, validateReservedMemory(c)...)
	if c.CPUManagerReconcilePeriod.Duration <= 0 {
		add("cpuManagerReconcilePeriod", "must be positive, got %s", c.CPUManagerReconcilePeriod.Duration)
	}
	return errors.Join(errs...)
}

// validateReservedMemory checks reservedMemory as upstream: memory and
// hugepages-<size> only, no zero, no resource twice for a NUMA node.
func validateReservedMemory(c *kubeletv1beta1.KubeletConfiguration) []error {
	var errs []error
	seen := map[int32]map[v1.ResourceName]bool{}
	for _, r := range c.ReservedMemory {
		node := r.NumaNode
		if seen[node] == nil {
			seen[node] = map[v1.ResourceName]bool{}
		}
		for name, q := range r.Limits {
			if name != v1.ResourceMemory && !strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
				errs = append(errs, fmt.Errorf("invalid configuration: the limit type %q for NUMA node %d is not supported, only [memory hugepages-<HugePageSize>] is accepted", name, node))
			}
			if q.IsZero() {
				errs = append(errs, fmt.Errorf("invalid configuration: reserved memory may not be zero for NUMA node %d and resource %q", node, name))
			}
			if seen[node][name] {
				errs = append(errs, fmt.Errorf("invalid configuration: the reserved memory has a duplicate value for NUMA node %d and resource %q", node, name))
			}
			seen[node][name] = true
		}
	}
	return errs
}

// defaultEvictionHard is upstream's default evictionHard on Linux, applied to
// a config file only (a kubelet run from flags alone has no hard threshold,
// as upstream).
func defaultEvictionHard() map[string]string {
	return map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%",
		"imagefs.available": "15%", "imagefs.inodesFree": "5%"}
}

// ApplyEvictionHardDefaults gives a config file's evictionHard upstream's
// defaults: all of them when unset, the missing ones with
// mergeDefaultEvictionSettings; otherwise a partial map replaces them.
func ApplyEvictionHardDefaults(c *kubeletv1beta1.KubeletConfiguration) {
	switch {
	case c.EvictionHard == nil:
		c.EvictionHard = defaultEvictionHard()
	case c.MergeDefaultEvictionSettings != nil && *c.MergeDefaultEvictionSettings:
		for k, v := range defaultEvictionHard() {
			if _, ok := c.EvictionHard[k]; !ok {
				c.EvictionHard[k] = v
			}
		}
	}
}

// validateGCConfig checks the image GC settings and nodeStatusMaxImages
// with upstream's messages.
func validateGCConfig(c *kubeletv1beta1.KubeletConfiguration) []error {
	var errs []error
	high, low := *c.ImageGCHighThresholdPercent, *c.ImageGCLowThresholdPercent
	if high < 0 || high > 100 {
		errs = append(errs, fmt.Errorf("invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) %v must be between 0 and 100, inclusive", high))
	}
	if low < 0 || low > 100 {
		errs = append(errs, fmt.Errorf("invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) %v must be between 0 and 100, inclusive", low))
	}
	if low >= high {
		errs = append(errs, fmt.Errorf("invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) %v must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) %v", low, high))
	}
	if c.ImageMinimumGCAge.Duration < 0 {
		errs = append(errs, fmt.Errorf("invalid configuration: imageMinimumGCAge %v must not be negative", c.ImageMinimumGCAge.Duration))
	}
	if c.ImageMaximumGCAge.Duration < 0 {
		errs = append(errs, fmt.Errorf("invalid configuration: imageMaximumGCAge %v must not be negative", c.ImageMaximumGCAge.Duration))
	}
	if c.ImageMaximumGCAge.Duration > 0 && c.ImageMaximumGCAge.Duration <= c.ImageMinimumGCAge.Duration {
		errs = append(errs, fmt.Errorf("invalid configuration: imageMaximumGCAge %v must be greater than imageMinimumGCAge %v", c.ImageMaximumGCAge.Duration, c.ImageMinimumGCAge.Duration))
	}
	if *c.NodeStatusMaxImages < -1 {
		errs = append(errs, fmt.Errorf("invalid configuration: nodeStatusMaxImages (--node-status-max-images) %v must be -1 or greater", *c.NodeStatusMaxImages))
	}
	if c.EvictionPressureTransitionPeriod.Duration < 0 {
		errs = append(errs, fmt.Errorf("invalid configuration: evictionPressureTransitionPeriod %v must not be negative", c.EvictionPressureTransitionPeriod.Duration))
	}
	return errs
}

// ApplyReservedCPUs makes reservedSystemCPUs the node's whole CPU
// reservation, as upstream does: systemReserved's cpu becomes the number of
// CPUs listed and kubeReserved's cpu goes.
func ApplyReservedCPUs(k *kubeletv1beta1.KubeletConfiguration, logger *zap.Logger) {
	cpus, err := cpuset.Parse(k.ReservedSystemCPUs)
	if err != nil || cpus.Size() == 0 {
		return // validated before
	}
	logger.Info("Option --reserved-cpus is specified, it will overwrite the cpu setting in KubeReserved and SystemReserved",
		zap.Any("kubeReserved", k.KubeReserved), zap.Any("systemReserved", k.SystemReserved))
	delete(k.KubeReserved, "cpu")
	if k.SystemReserved == nil {
		k.SystemReserved = map[string]string{}
	}
	k.SystemReserved["cpu"] = strconv.Itoa(cpus.Size())
}

// The enforceNodeAllocatable keys (upstream's kubetypes).
const (
	EnforcePods                       = "pods"
	EnforceSystemReserved             = "system-reserved"
	EnforceSystemReservedCompressible = "system-reserved-compressible"
	EnforceKubeReserved               = "kube-reserved"
	EnforceKubeReservedCompressible   = "kube-reserved-compressible"
	enforceNone                       = "none"
)

// validateNodeAllocatableConfig checks enforceNodeAllocatable, the reserved
// cgroups and reservedSystemCPUs with upstream's messages.
func validateNodeAllocatableConfig(c *kubeletv1beta1.KubeletConfiguration) []error {
	var errs []error
	has := map[string]bool{}
	for _, v := range c.EnforceNodeAllocatable {
		has[v] = true
	}
	for _, pair := range [][2]string{{EnforceSystemReserved, EnforceSystemReservedCompressible}, {EnforceKubeReserved, EnforceKubeReservedCompressible}} {
		if has[pair[0]] && has[pair[1]] {
			errs = append(errs, fmt.Errorf("invalid configuration: both %q and %q cannot be specified together in enforceNodeAllocatable (--enforce-node-allocatable)", pair[0], pair[1]))
		}
	}
	seen := map[string]bool{}
	for _, v := range c.EnforceNodeAllocatable {
		if seen[v] {
			errs = append(errs, fmt.Errorf("invalid configuration: duplicated enforcements %q in enforceNodeAllocatable (--enforce-node-allocatable)", v))
			continue
		}
		seen[v] = true
		switch v {
		case EnforcePods:
		case EnforceSystemReserved, EnforceSystemReservedCompressible:
			if c.SystemReservedCgroup == "" {
				errs = append(errs, fmt.Errorf("invalid configuration: systemReservedCgroup (--system-reserved-cgroup) must be specified when %q or %q included in enforceNodeAllocatable (--enforce-node-allocatable)", EnforceSystemReserved, EnforceSystemReservedCompressible))
			}
		case EnforceKubeReserved, EnforceKubeReservedCompressible:
			if c.KubeReservedCgroup == "" {
				errs = append(errs, fmt.Errorf("invalid configuration: kubeReservedCgroup (--kube-reserved-cgroup) must be specified when %q or %q included in enforceNodeAllocatable (--enforce-node-allocatable)", EnforceKubeReserved, EnforceKubeReservedCompressible))
			}
		case enforceNone:
			if len(c.EnforceNodeAllocatable) > 1 {
				errs = append(errs, fmt.Errorf("invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) may not contain additional enforcements when %q is specified", enforceNone))
			}
		default:
			errs = append(errs, fmt.Errorf("invalid configuration: option %q specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are %q, %q, %q, %q, %q or %q",
				v, EnforcePods, EnforceSystemReserved, EnforceSystemReservedCompressible, EnforceKubeReserved, EnforceKubeReservedCompressible, enforceNone))
		}
	}
	if c.ReservedSystemCPUs != "" {
		if c.SystemReservedCgroup != "" || c.KubeReservedCgroup != "" {
			errs = append(errs, errors.New("invalid configuration: can't use reservedSystemCPUs (--reserved-cpus) with systemReservedCgroup (--system-reserved-cgroup) or kubeReservedCgroup (--kube-reserved-cgroup)"))
		}
		if _, err := cpuset.Parse(c.ReservedSystemCPUs); err != nil {
			errs = append(errs, fmt.Errorf("invalid configuration: unable to parse reservedSystemCPUs (--reserved-cpus) %v, error: %w", c.ReservedSystemCPUs, err))
		}
	}
	return errs
}

// validateTLSConfig checks tlsCipherSuites and tlsMinVersion as upstream
// (component-base's names and versions).
func validateTLSConfig(c *kubeletv1beta1.KubeletConfiguration) []error {
	var errs []error
	suites, err := cliflag.TLSCipherSuites(c.TLSCipherSuites)
	if err != nil {
		errs = append(errs, fmt.Errorf("invalid configuration: tlsCipherSuites (--tls-cipher-suites): %w", err))
	}
	v, err := cliflag.TLSVersion(c.TLSMinVersion)
	if err != nil {
		errs = append(errs, fmt.Errorf("invalid configuration: tlsMinVersion (--tls-min-version): %w", err))
	}
	if v == tls.VersionTLS13 && len(suites) > 0 {
		errs = append(errs, errors.New("minimum TLS version is 1.3, so --tls-cipher-suites should not be specified"))
	}
	return errs
}

// checkQOSReserved checks qosReserved as upstream's ParseQOSReserved: only
// memory, as a percentage from 0% to 100%.
func checkQOSReserved(m map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k != "memory" {
			return fmt.Errorf("cannot reserve %q resource", k)
		}
		if _, err := ParsePercentage(m[k]); err != nil {
			return fmt.Errorf("failed to parse percentage %q for %q resource: %w", m[k], k, err)
		}
	}
	return nil
}

// ParsePercentage reads "N%" with N from 0 to 100 (upstream's parsePercentage).
func ParsePercentage(v string) (int64, error) {
	if !strings.HasSuffix(v, "%") {
		return 0, fmt.Errorf("percentage expected, got '%s'", v)
	}
	n, err := strconv.ParseInt(strings.TrimRight(v, "%"), 10, 0)
	if err != nil {
		return 0, fmt.Errorf("invalid number in percentage '%s'", v)
	}
	if n < 0 || n > 100 {
		return 0, errors.New("percentage must be between 0 and 100")
	}
	return n, nil
}
