package options

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// notHonouredFields are the KubeletConfiguration fields (json paths; a path
// covers what is under it) this kubelet accepts but does not act on. Set away
// from their default, they are named in one warning at start and listed by
// /configz under NotHonoredKey. Every other field is acted on; a test keeps
// the two lists complete against the v1beta1 type.
var notHonouredFields = []string{
	"systemCgroups",
	"memoryReservationPolicy",
	"volumePluginDir",
	"userNamespaces",
}

// honouredFields are the fields this kubelet acts on. Two are met by
// construction: logging.flushFrequency (this logger never buffers: every
// entry is written at once) and, in remote mode, streamingConnectionIdleTimeout
// (the runtime's own streaming server applies its timeout, as with upstream's
// kubelet; the built-in shim applies this one).
var honouredFields = []string{
	"enableServer", "staticPodPath", "podLogsDir", "syncFrequency", "fileCheckFrequency", "httpCheckFrequency",
	"staticPodURL", "staticPodURLHeader", "address", "port", "readOnlyPort",
	"tlsCertFile", "tlsPrivateKeyFile", "tlsCipherSuites", "tlsMinVersion", "tlsCurvePreferences",
	"rotateCertificates", "serverTLSBootstrap", "authentication", "authorization",
	"registryPullQPS", "registryBurst", "eventRecordQPS", "eventBurst",
	"enableDebuggingHandlers", "enableContentionProfiling", "enableProfilingHandler", "enableSystemLogHandler", "enableDebugFlagsHandler",
	"healthzPort", "healthzBindAddress", "oomScoreAdj", "clusterDomain", "clusterDNS",
	"streamingConnectionIdleTimeout", "nodeStatusUpdateFrequency", "nodeStatusReportFrequency", "nodeLeaseDurationSeconds",
	"imageMinimumGCAge", "imageMaximumGCAge", "imageGCHighThresholdPercent", "imageGCLowThresholdPercent",
	"volumeStatsAggPeriod", "cgroupRoot", "cgroupsPerQOS", "cgroupDriver",
	"cpuManagerPolicy", "cpuManagerReconcilePeriod", "memoryThrottlingFactor", "runtimeRequestTimeout",
	"maxPods", "podCIDR", "podPidsLimit", "resolvConf", "runOnce", "cpuCFSQuota", "cpuCFSQuotaPeriod", "nodeStatusMaxImages",
	"maxOpenFiles", "contentType", "kubeAPIQPS", "kubeAPIBurst", "serializeImagePulls", "maxParallelImagePulls",
	"evictionHard", "evictionSoft", "evictionSoftGracePeriod", "evictionPressureTransitionPeriod",
	"evictionMaxPodGracePeriod", "evictionMinimumReclaim", "mergeDefaultEvictionSettings", "podsPerCore",
	"enableControllerAttachDetach", "featureGates", "failSwapOn", "failCgroupV1", "tracing",
	"imagePullCredentialsVerificationPolicy", "preloadedImagesVerificationAllowlist",
	"topologyManagerPolicy", "topologyManagerScope", "topologyManagerPolicyOptions", "memoryManagerPolicy", "reservedMemory",
	"containerLogMaxSize", "containerLogMaxFiles", "containerLogMaxWorkers", "containerLogMonitorInterval",
	"systemReserved", "kubeReserved", "reservedSystemCPUs", "systemReservedCgroup", "kubeReservedCgroup",
	"enforceNodeAllocatable", "allowedUnsafeSysctls", "providerID", "kernelMemcgNotification", "protectKernelDefaults",
	"logging.format", "logging.flushFrequency", "logging.verbosity",
	"crashLoopBackOff", "seccompDefault", "shutdownGracePeriod", "shutdownGracePeriodCriticalPods", "shutdownGracePeriodByPodPriority", "registerWithTaints", "registerNode",
	"localStorageCapacityIsolation", "containerRuntimeEndpoint", "imageServiceEndpoint",
	// Upstream's chains (internal/kubelet/utilchains); the two bits are only
	// range-checked by upstream's kubelet, and here.
	"makeIPTablesUtilChains", "iptablesMasqueradeBit", "iptablesDropBit",
	// Watch, Cache and Get, as upstream (internal/kubelet/apiobjects).
	"configMapAndSecretChangeDetectionStrategy",
	// Checked as upstream (the previous minor version only); it shows the
	// hidden metrics of the libraries' registry (this kubelet's own have
	// none hidden, as upstream's kubelet).
	"showHiddenMetricsForVersion",
	// With the DefaultPodSysctls gate, as upstream (required for it).
	"defaultPodSysctls",
	// This process is kept in it (created where missing), every minute.
	"kubeletCgroups",
	// On cgroup v2, false (the default there) gives every container
	// memory.oom.group 1; false on cgroup v1 is refused, as upstream.
	"singleProcessOOMKill",
	// NoSwap (the default): memory+swap = memory on cgroup v1, memory.swap.max
	// 0 on cgroup v2; LimitedSwap: Burstable containers' share, as upstream.
	"memorySwap",
	// The node log query of /logs/ (journalctl or the services' log files).
	"enableSystemLogQuery",
	// full-pcpus-only and strict-cpu-reservation; upstream's other options
	// are refused at start when true.
	"cpuManagerPolicyOptions",
	// klog's -vmodule for klog's lines, and this kubelet's Debug (-v=4)
	// lines of the files raised to 4 or more; the split streams and info
	// buffer of the text and JSON formats (LoggingAlphaOptions), as upstream.
	"logging.vmodule", "logging.options",
	// With the QOSReserved gate (alpha), the QoS cgroups' memory limits, as
	// upstream; without it upstream ignores it too (a warning says so).
	"qosReserved",
	// Only checked, as upstream's kubelet since the dockershim left it; the
	// 1.23 dockershim used it for kubenet only, and here the CNI
	// configuration decides (the bridge plugin's hairpinMode).
	"hairpinMode",
}

// NotHonoredKey is the /configz key listing what is set but not acted on.
const NotHonoredKey = "notHonored"

// notHonoured returns the json paths of the fields of k that differ from
// def and that this kubelet does not act on, sorted.
func notHonoured(k, def *kubeletv1beta1.KubeletConfiguration) []string {
	var out []string
	walkConfigLeaves(reflect.ValueOf(*k), reflect.ValueOf(*def), "", func(path string, differs bool) {
		if differs && coveredBy(path, notHonouredFields) {
			out = append(out, path)
		}
	})
	slices.Sort(out)
	return slices.Compact(out)
}

// NotHonoured lists the configuration fields and flags set away from their
// defaults that this kubelet does not act on (/configz's NotHonoredKey and
// the warning at start): config fields by json path, flags as --name.
func (c *Config) NotHonoured() []string {
	def := DefaultConfig()
	out := notHonoured(&c.Kubelet, &def.Kubelet)
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"--housekeeping-interval", c.HousekeepingInterval != def.HousekeepingInterval},
		{"--experimental-allocatable-ignore-eviction", c.ExperimentalAllocatableIgnoreEviction},
		{"--experimental-mounter-path", c.ExperimentalMounterPath != ""},
		{"--network-plugin-mtu", c.NetworkPluginMTU != 0},
		{"--experimental-dockershim-seccomp-profile-root", c.SeccompProfileRoot != ""},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// coveredBy reports whether path or one of its parents is in list.
func coveredBy(path string, list []string) bool {
	for p := path; ; {
		if slices.Contains(list, p) {
			return true
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

var jsonMarshaler = reflect.TypeFor[json.Marshaler]()

// walkConfigLeaves calls fn with the json path of every leaf field of a and
// whether it differs from b's. Structs are walked into unless they marshal
// themselves (durations, quantities); maps, slices and pointers to scalars
// are leaves.
func walkConfigLeaves(a, b reflect.Value, prefix string, fn func(path string, differs bool)) {
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[metav1.TypeMeta]() {
			walkConfigLeaves(a.Field(i), b.Field(i), prefix, fn) // inlined
			continue
		}
		if f.Anonymous || name == "" || name == "-" {
			continue // TypeMeta
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		av, bv := a.Field(i), b.Field(i)
		ft := f.Type
		if ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct && !ft.Implements(jsonMarshaler) {
			if av.IsNil() || bv.IsNil() {
				fn(path, av.IsNil() != bv.IsNil())
				continue
			}
			av, bv, ft = av.Elem(), bv.Elem(), ft.Elem()
		}
		if ft.Kind() == reflect.Struct && !ft.Implements(jsonMarshaler) && !reflect.PointerTo(ft).Implements(jsonMarshaler) {
			walkConfigLeaves(av, bv, path, fn)
			continue
		}
		fn(path, !reflect.DeepEqual(av.Interface(), bv.Interface()))
	}
}
