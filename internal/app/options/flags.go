package options

import (
	"strings"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"

	// The json log format is registered, so --logging-format lists it and
	// the log-json-* flags exist, as in upstream's kubelet.
	_ "k8s.io/component-base/logs/json/register"

	"github.com/kubelet-dockershim/kubelet/internal/features"
)

// configFlagDeprecation is what upstream prints for every flag that sets a
// KubeletConfiguration field (its help suffix and its warning when used).
const configFlagDeprecation = "This parameter should be set via the config file specified by the Kubelet's --config flag. See https://kubernetes.io/docs/tasks/administer-cluster/kubelet-config-file/ for more information."

// notDeprecatedConfigFlags set KubeletConfiguration fields but carry no
// deprecation, as upstream's.
var notDeprecatedConfigFlags = map[string]bool{
	"v": true, "vmodule": true, "log-flush-frequency": true, "provider-id": true,
	"seccomp-default": true, "fail-cgroupv1": true,
}

// AddFlags binds every flag of the upstream v1.37 kubelet plus the dockershim's.
// Flag-only settings go to cfg's own fields; flags of KubeletConfiguration
// fields bind straight onto cfg.Kubelet, which already holds the defaults, the
// --config file and its drop-ins, so parsing applies flags last. The config
// flags are marked deprecated with upstream's text, as upstream does.
func AddFlags(fs *pflag.FlagSet, cfg *Config) {
	addRuntimeFlags(fs, cfg)
	addNodeFlags(fs, cfg)
	cfs := pflag.NewFlagSet("config", pflag.ContinueOnError)
	addConfigFlags(cfs, cfg)
	addServerFlags(cfs, cfg)
	addReservationFlags(cfs, cfg)
	addEvictionFlags(cfs, cfg)
	logsapi.AddFlags(&cfg.Kubelet.Logging, cfs)
	cfs.VisitAll(func(f *pflag.Flag) {
		if !notDeprecatedConfigFlags[f.Name] {
			f.Deprecated = configFlagDeprecation
		}
	})
	fs.AddFlagSet(cfs)
	fs.Var(&versionFlag{cfg: cfg}, "version", "--version, --version=raw prints version information and quits; --version=vX.Y.Z... sets the reported version")
	fs.Lookup("version").NoOptDefVal = "true"
}

// addConfigFlags binds the flags of the KubeletConfiguration's general fields.
func addConfigFlags(fs *pflag.FlagSet, cfg *Config) {
	k := &cfg.Kubelet
	fs.Var(cliflag.NewMapStringBool(&k.FeatureGates), "feature-gates", featureGatesUsage())
	fs.BoolVar(k.EnableServer, "enable-server", *k.EnableServer, "Serve the kubelet API (HTTPS).")
	fs.StringVar(&k.StaticPodPath, "pod-manifest-path", k.StaticPodPath, "Path to the directory (or file) of static pod manifests.")
	fs.StringVar(&k.StaticPodURL, "manifest-url", k.StaticPodURL, "URL to fetch static pod manifests from.")
	fs.Var(cliflag.NewColonSeparatedMultimapStringString(&k.StaticPodURLHeader), "manifest-url-header", "HTTP headers sent with every --manifest-url request, as 'Name:value' pairs, comma separated (a name may repeat).")
	fs.DurationVar(&k.FileCheckFrequency.Duration, "file-check-frequency", k.FileCheckFrequency.Duration, "How often the manifest directory is re-read in full.")
	fs.DurationVar(&k.HTTPCheckFrequency.Duration, "http-check-frequency", k.HTTPCheckFrequency.Duration, "How often --manifest-url is fetched.")
	fs.DurationVar(&k.SyncFrequency.Duration, "sync-frequency", k.SyncFrequency.Duration, "Max period between syncs of a running pod.")
	fs.BoolVar(&k.RunOnce, "runonce", k.RunOnce, "Run the static pods once and exit (not supported by this kubelet: an error).")
	fs.StringVar(&k.CgroupDriver, "cgroup-driver", k.CgroupDriver, "The kubelet's cgroup driver: cgroupfs or systemd (must match the runtime's).")
	fs.StringVar(&k.CgroupRoot, "cgroup-root", k.CgroupRoot, "The cgroup the node-allocatable cgroup (kubepods) is made under; \"\" is the root, /.")
	fs.BoolVar(k.CgroupsPerQOS, "cgroups-per-qos", *k.CgroupsPerQOS, "Make the kubepods, QoS (burstable, besteffort) and per-pod cgroups and run each pod in its own.")
	fs.StringVar(&k.KubeletCgroups, "kubelet-cgroups", k.KubeletCgroups, "Absolute name of the cgroup to run the kubelet in.")
	fs.StringVar(&k.SystemCgroups, "system-cgroups", k.SystemCgroups, "Absolute name of the cgroup for the processes that are not in a container (needs --cgroup-root).")
	fs.BoolVar(k.FailCgroupV1, "fail-cgroupv1", *k.FailCgroupV1, "Refuse to start on a host that uses cgroup v1.")
	fs.Int64Var(k.PodPidsLimit, "pod-max-pids", *k.PodPidsLimit, "The pids.max of every pod cgroup; -1 (or any value <= 0) sets none, so pods share the node-allocatable limit.")
	fs.DurationVar(&k.CPUCFSQuotaPeriod.Duration, "cpu-cfs-quota-period", k.CPUCFSQuotaPeriod.Duration, "The CFS period (cpu.cfs_period_us) CPU limits are enforced over.")
	fs.BoolVar(k.CPUCFSQuota, "cpu-cfs-quota", *k.CPUCFSQuota, "Enforce CPU limits with CFS quota.")
	fs.StringVar(&k.CPUManagerPolicy, "cpu-manager-policy", k.CPUManagerPolicy, "The CPU manager policy: none or static (exclusive CPUs for Guaranteed pods with whole-CPU requests; state in <root-dir>/cpu_manager_state).")
	fs.Var(cliflag.NewMapStringString(&k.CPUManagerPolicyOptions), "cpu-manager-policy-options", "Options of the CPU manager policy (key=value,...).")
	fs.DurationVar(&k.CPUManagerReconcilePeriod.Duration, "cpu-manager-reconcile-period", k.CPUManagerReconcilePeriod.Duration, "How often the CPU manager brings containers' cpusets up to date.")
	fs.StringVar(&k.MemoryManagerPolicy, "memory-manager-policy", k.MemoryManagerPolicy, "The memory manager policy: None or Static.")
	fs.StringVar(&k.TopologyManagerPolicy, "topology-manager-policy", k.TopologyManagerPolicy, "The topology manager policy: none, best-effort, restricted or single-numa-node.")
	fs.StringVar(&k.TopologyManagerScope, "topology-manager-scope", k.TopologyManagerScope, "The scope topology hints are produced for: container or pod.")
	fs.Var(cliflag.NewMapStringString(&k.TopologyManagerPolicyOptions), "topology-manager-policy-options", "Options of the topology manager policy (key=value,...).")
	fs.Var(cliflag.NewMapStringString(&k.QOSReserved), "qos-reserved", "Percentages of a resource reserved for higher QoS classes, as name=percentage pairs (e.g. memory=50%).")
	fs.DurationVar(&k.RuntimeRequestTimeout.Duration, "runtime-request-timeout", k.RuntimeRequestTimeout.Duration, "Timeout of every CRI request except long-running ones.")
	fs.StringVar(&k.ContainerRuntimeEndpoint, "container-runtime-endpoint", k.ContainerRuntimeEndpoint, "The CRI endpoint: where the built-in dockershim serves, or the remote runtime to dial.")
	fs.StringVar(&k.ImageServiceEndpoint, "image-service-endpoint", k.ImageServiceEndpoint, "The CRI image service endpoint (defaults to --container-runtime-endpoint).")
	fs.StringSliceVar(&k.ClusterDNS, "cluster-dns", k.ClusterDNS, "Comma-separated DNS server IPs for pods with dnsPolicy ClusterFirst.")
	fs.StringVar(&k.ClusterDomain, "cluster-domain", k.ClusterDomain, "The cluster's DNS domain (e.g. cluster.local).")
	fs.StringVar(k.ResolverConfig, "resolv-conf", *k.ResolverConfig, "The resolv.conf pods with dnsPolicy Default inherit (\"\" for none).")
	fs.StringVar(&k.HairpinMode, "hairpin-mode", k.HairpinMode, "How a pod reaches itself through its service: promiscuous-bridge, hairpin-veth or none.")
	fs.StringVar(&k.PodCIDR, "pod-cidr", k.PodCIDR, "The pod CIDR of a standalone node (a cluster node takes the node's spec.podCIDR).")
	fs.StringVar(&k.ContainerLogMaxSize, "container-log-max-size", k.ContainerLogMaxSize, "Rotate a container's log when it grows past this size.")
	fs.Int32Var(k.ContainerLogMaxFiles, "container-log-max-files", *k.ContainerLogMaxFiles, "Log files kept per container, the live one included.")
	fs.Int32Var(&k.MaxPods, "max-pods", k.MaxPods, "The number of pods this kubelet can run.")
	fs.Int32Var(&k.PodsPerCore, "pods-per-core", k.PodsPerCore, "The number of pods per CPU core this kubelet can run (0: no such limit; never more than --max-pods).")
	fs.Int64Var(&k.MaxOpenFiles, "max-open-files", k.MaxOpenFiles, "The kubelet process's open file limit.")
	fs.Int32Var(k.OOMScoreAdj, "oom-score-adj", *k.OOMScoreAdj, "The oom_score_adj of the kubelet process.")
	fs.BoolVar(k.FailSwapOn, "fail-swap-on", *k.FailSwapOn, "Refuse to start when swap is on.")
	fs.BoolVar(&k.ProtectKernelDefaults, "protect-kernel-defaults", k.ProtectKernelDefaults, "Fail when kernel tunables differ from the kubelet's defaults instead of changing them.")
	fs.BoolVar(k.MakeIPTablesUtilChains, "make-iptables-util-chains", *k.MakeIPTablesUtilChains, "Make and keep the KUBE-FIREWALL iptables chain.")
	fs.StringSliceVar(&k.AllowedUnsafeSysctls, "allowed-unsafe-sysctls", k.AllowedUnsafeSysctls, "Comma-separated unsafe sysctls (or prefixes ending in *) pods may set.")
	fs.BoolVar(k.SeccompDefault, "seccomp-default", *k.SeccompDefault, "Use `RuntimeDefault` as the seccomp profile of every workload that sets none.")
	fs.BoolVar(k.EnableControllerAttachDetach, "enable-controller-attach-detach", *k.EnableControllerAttachDetach, "Leave volume attach and detach to the attach/detach controller.")
	fs.StringVar(&k.VolumePluginDir, "volume-plugin-dir", k.VolumePluginDir, "The directory of flex volume plugins.")
	fs.DurationVar(&k.VolumeStatsAggPeriod.Duration, "volume-stats-agg-period", k.VolumeStatsAggPeriod.Duration, "How often volume disk usage is computed (0 disables it).")
	fs.BoolVar(k.RegisterNode, "register-node", *k.RegisterNode, "Register the node with the API server.")
	fs.Var(&taintsFlag{taints: &k.RegisterWithTaints}, "register-with-taints", "Taints the node is registered with (comma separated \"<key>=<value>:<effect>\"); unused when --register-node is false.")
	fs.StringVar(&k.ProviderID, "provider-id", k.ProviderID, "The node's ID in the cloud provider's machine database (spec.providerID).")
	fs.DurationVar(&k.NodeStatusUpdateFrequency.Duration, "node-status-update-frequency", k.NodeStatusUpdateFrequency.Duration, "How often the node's status is computed, and posted when it changed.")
	fs.BoolVar(k.SerializeImagePulls, "serialize-image-pulls", *k.SerializeImagePulls, "Pull images one at a time.")
	fs.Int32Var(k.RegistryPullQPS, "registry-qps", *k.RegistryPullQPS, "Image pulls per second (0: no limit).")
	fs.Int32Var(&k.RegistryBurst, "registry-burst", k.RegistryBurst, "Image pulls allowed in a burst above --registry-qps.")
	fs.Int32Var(k.EventRecordQPS, "event-qps", *k.EventRecordQPS, "Events sent per second (0: no limit).")
	fs.Int32Var(&k.EventBurst, "event-burst", k.EventBurst, "Events allowed in a burst above --event-qps.")
	fs.Int32Var(k.KubeAPIQPS, "kube-api-qps", *k.KubeAPIQPS, "Requests per second to the API server.")
	fs.Int32Var(&k.KubeAPIBurst, "kube-api-burst", k.KubeAPIBurst, "Requests to the API server allowed in a burst above --kube-api-qps.")
	fs.StringVar(&k.ContentType, "kube-api-content-type", k.ContentType, "The content type of requests to the API server.")
	fs.Int32Var(k.HealthzPort, "healthz-port", *k.HealthzPort, "Port of the localhost healthz endpoint (0 disables it).")
	fs.Var(&ipFlag{ip: &k.HealthzBindAddress}, "healthz-bind-address", "IP address of the healthz endpoint.")
	fs.BoolVar(k.EnableDebuggingHandlers, "enable-debugging-handlers", *k.EnableDebuggingHandlers, "Serve logs, exec, attach, port-forward and run on the kubelet API.")
	fs.BoolVar(&k.EnableContentionProfiling, "contention-profiling", k.EnableContentionProfiling, "Record lock contention in /debug/pprof (with profiling on).")
}

// addReservationFlags binds node allocatable's flags: what is held back for
// the system and the kubelet, and where the reservations are enforced
// (upstream's names and map syntaxes).
func addReservationFlags(fs *pflag.FlagSet, cfg *Config) {
	k := &cfg.Kubelet
	fs.Var(cliflag.NewMapStringString(&k.SystemReserved), "system-reserved", "Resources reserved for non-Kubernetes components, as name=quantity pairs (e.g. cpu=200m,memory=500Mi,ephemeral-storage=1Gi,pid=100): cpu, memory, ephemeral-storage and pid.")
	fs.Var(cliflag.NewMapStringString(&k.KubeReserved), "kube-reserved", "Resources reserved for Kubernetes system components (the kubelet, the runtime), as name=quantity pairs (e.g. cpu=200m,memory=500Mi,ephemeral-storage=1Gi,pid=100).")
	fs.StringSliceVar(&k.EnforceNodeAllocatable, "enforce-node-allocatable", k.EnforceNodeAllocatable, "Where node allocatable is enforced: none, or any of pods, system-reserved, system-reserved-compressible, kube-reserved, kube-reserved-compressible (the reserved ones need --system-reserved-cgroup / --kube-reserved-cgroup).")
	fs.StringVar(&k.SystemReservedCgroup, "system-reserved-cgroup", k.SystemReservedCgroup, "Absolute name of the existing cgroup that --system-reserved is enforced on.")
	fs.StringVar(&k.KubeReservedCgroup, "kube-reserved-cgroup", k.KubeReservedCgroup, "Absolute name of the existing cgroup that --kube-reserved is enforced on.")
	fs.StringVar(&k.ReservedSystemCPUs, "reserved-cpus", k.ReservedSystemCPUs, "A CPU list (e.g. 0,1 or 0-3) reserved for the system and Kubernetes system daemons; it overrides the cpu of --system-reserved and --kube-reserved.")
	fs.Var(&reservedMemoryFlag{reservations: &k.ReservedMemory}, "reserved-memory", "Memory reserved per NUMA node for the memory manager, e.g. '0:memory=1Gi,hugepages-1M=2Gi'; repeat the flag (or separate with ';') for more nodes.")
}

// addEvictionFlags binds the eviction thresholds, image GC and the
// (deprecated) container GC flags, with upstream's names, syntaxes and help.
func addEvictionFlags(fs *pflag.FlagSet, cfg *Config) {
	k := &cfg.Kubelet
	fs.Var(cliflag.NewLangleSeparatedMapStringString(&k.EvictionHard), "eviction-hard", "A set of eviction thresholds (e.g. memory.available<1Gi) that if met would trigger a pod eviction.")
	fs.Var(cliflag.NewLangleSeparatedMapStringString(&k.EvictionSoft), "eviction-soft", "A set of eviction thresholds (e.g. memory.available<1.5Gi) that if met over a corresponding grace period would trigger a pod eviction.")
	fs.Var(cliflag.NewMapStringString(&k.EvictionSoftGracePeriod), "eviction-soft-grace-period", "A set of eviction grace periods (e.g. memory.available=1m30s) that correspond to how long a soft eviction threshold must hold before triggering a pod eviction.")
	fs.DurationVar(&k.EvictionPressureTransitionPeriod.Duration, "eviction-pressure-transition-period", k.EvictionPressureTransitionPeriod.Duration, "Duration for which the kubelet has to wait before transitioning out of an eviction pressure condition.")
	fs.Int32Var(&k.EvictionMaxPodGracePeriod, "eviction-max-pod-grace-period", k.EvictionMaxPodGracePeriod, "Maximum allowed grace period (in seconds) to use when terminating pods in response to a soft eviction threshold being met.  If negative, defer to pod specified value.")
	fs.Var(cliflag.NewMapStringString(&k.EvictionMinimumReclaim), "eviction-minimum-reclaim", "A set of minimum reclaims (e.g. imagefs.available=2Gi) that describes the minimum amount of resource the kubelet will reclaim when performing a pod eviction if that resource is under pressure.")
	fs.BoolVar(&k.KernelMemcgNotification, "kernel-memcg-notification", k.KernelMemcgNotification, "If enabled, the kubelet will integrate with the kernel memcg notification to determine if memory eviction thresholds are crossed rather than polling.")
	fs.BoolVar(k.LocalStorageCapacityIsolation, "local-storage-capacity-isolation", *k.LocalStorageCapacityIsolation, "If true, local ephemeral storage isolation is enabled. Otherwise, local storage isolation feature will be disabled")
	fs.DurationVar(&k.ImageMinimumGCAge.Duration, "minimum-image-ttl-duration", k.ImageMinimumGCAge.Duration, "Minimum age for an unused image before it is garbage collected.  Examples: '300ms', '10s' or '2h45m'.")
	fs.Int32Var(k.ImageGCHighThresholdPercent, "image-gc-high-threshold", *k.ImageGCHighThresholdPercent, "The percent of disk usage after which image garbage collection is always run. Values must be within the range [0, 100], To disable image garbage collection, set to 100. ")
	fs.Int32Var(k.ImageGCLowThresholdPercent, "image-gc-low-threshold", *k.ImageGCLowThresholdPercent, "The percent of disk usage before which image garbage collection is never run. Lowest disk usage to garbage collect to. Values must be within the range [0, 100] and must be less than that of --image-gc-high-threshold.")
	fs.Int32Var(k.NodeStatusMaxImages, "node-status-max-images", *k.NodeStatusMaxImages, "The maximum number of images to report in Node.Status.Images. If -1 is specified, no cap will be applied.")
}

// addRuntimeFlags binds the container runtime and dockershim flags (those of
// the 1.23 kubelet; upstream has removed them, this kubelet is the dockershim).
func addRuntimeFlags(fs *pflag.FlagSet, cfg *Config) {
	fs.StringVar(&cfg.ContainerRuntime, "container-runtime", cfg.ContainerRuntime, "The container runtime: docker (built-in dockershim) or remote (a CRI endpoint).")
	fs.BoolVar(&cfg.ExperimentalDockershim, "experimental-dockershim", cfg.ExperimentalDockershim, "Run only the dockershim CRI server on --container-runtime-endpoint and nothing else.")
	fs.StringVar(&cfg.DockerEndpoint, "docker-endpoint", cfg.DockerEndpoint, "The Docker daemon endpoint.")
	fs.StringVar(&cfg.PodInfraContainerImage, "pod-infra-container-image", cfg.PodInfraContainerImage, "The image of each pod's sandbox (pause) container.")
	fs.StringVar(&cfg.DockershimRootDirectory, "experimental-dockershim-root-directory", cfg.DockershimRootDirectory, "The dockershim's state directory (sandbox checkpoints).")
	fs.StringVar(&cfg.CRIDockerdRootDirectory, "cri-dockerd-root-directory", cfg.CRIDockerdRootDirectory, "cri-dockerd's root directory (its flag of the same name): the pods cri-dockerd ran on this Docker are adopted, not restarted, with the port mappings of its sandbox checkpoints. Empty: only libcni's cache and Docker are read.")
	fs.StringVar(&cfg.SeccompProfileRoot, "experimental-dockershim-seccomp-profile-root", cfg.SeccompProfileRoot, "No effect: the dockershim reads a Localhost seccomp profile at the absolute host path the CRI request names.")
	fs.StringVar(&cfg.NetworkPlugin, "network-plugin", cfg.NetworkPlugin, "The network plugin: cni.")
	fs.Int32Var(&cfg.NetworkPluginMTU, "network-plugin-mtu", cfg.NetworkPluginMTU, "The MTU passed to the CNI plugins (0: the plugin's own).")
	fs.StringVar(&cfg.CNIBinDir, "cni-bin-dir", cfg.CNIBinDir, "Comma-separated directories holding CNI plugin binaries.")
	fs.StringVar(&cfg.CNIConfDir, "cni-conf-dir", cfg.CNIConfDir, "The directory holding CNI network configs; the first in lexical order is the pod network.")
	fs.StringVar(&cfg.CNICacheDir, "cni-cache-dir", cfg.CNICacheDir, "The CNI cache directory.")
	fs.DurationVar(&cfg.ImagePullProgressDeadline, "image-pull-progress-deadline", cfg.ImagePullProgressDeadline, "Cancel an image pull that makes no progress for this long.")
	fs.StringVar(&cfg.RuntimeCgroups, "runtime-cgroups", cfg.RuntimeCgroups, "Optional absolute name of the cgroup to put the container runtime in.")
	fs.StringVar(&cfg.StreamingAddress, "streaming-address", cfg.StreamingAddress, "The address (IP, or IP:port) the exec/attach/port-forward streaming server binds to.")
}

// addNodeFlags binds the flag-only settings of upstream's kubelet (its
// KubeletFlags): node identity, credentials and paths kubeadm passes.
func addNodeFlags(fs *pflag.FlagSet, cfg *Config) {
	fs.StringVar(&cfg.ConfigFile, "config", cfg.ConfigFile, "Path to a KubeletConfiguration (kubelet.config.k8s.io/v1beta1) file; flags override it.")
	fs.StringVar(&cfg.ConfigDir, "config-dir", cfg.ConfigDir, "A directory of KubeletConfiguration drop-ins (*.conf), merged over --config in lexical order (JSON merge patch); flags override them.")
	fs.StringVar(&cfg.RootDirectory, "root-dir", cfg.RootDirectory, "The kubelet's state directory (pod volumes, plugins).")
	fs.StringVar(&cfg.CertDirectory, "cert-dir", cfg.CertDirectory, "The directory of the kubelet's TLS certificates (unused for the serving certificate when --tls-cert-file is set).")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", cfg.Kubeconfig, "Path to a kubeconfig for the API server.")
	fs.StringVar(&cfg.BootstrapKubeconfig, "bootstrap-kubeconfig", cfg.BootstrapKubeconfig, "Path to a bootstrap kubeconfig for TLS bootstrapping.")
	fs.StringVar(&cfg.HostnameOverride, "hostname-override", cfg.HostnameOverride, "The node name to use instead of the hostname.")
	fs.StringVar(&cfg.NodeIP, "node-ip", cfg.NodeIP, "IP address(es) of the node (comma separated for dual stack).")
	fs.Var(cliflag.NewMapStringString(&cfg.NodeLabels), "node-labels", "Labels to add when registering the node (key=value,...).")
	fs.StringVar(&cfg.CloudProvider, "cloud-provider", cfg.CloudProvider, "The cloud provider: \"\" for none, or 'external' for a cloud controller manager.")
	fs.StringVar(&cfg.ImageCredentialProviderConfig, "image-credential-provider-config", cfg.ImageCredentialProviderConfig, "The CredentialProviderConfig file (or directory) of the image credential provider plugins.")
	fs.StringVar(&cfg.ImageCredentialProviderBinDir, "image-credential-provider-bin-dir", cfg.ImageCredentialProviderBinDir, "The directory of the image credential provider plugin binaries.")
	fs.StringVar(&cfg.LockFilePath, "lock-file", cfg.LockFilePath, "<Warning: Alpha feature> A file the kubelet holds a lock on while it runs.")
	fs.BoolVar(&cfg.ExitOnLockContention, "exit-on-lock-contention", cfg.ExitOnLockContention, "Exit when another process opens --lock-file.")
	fs.DurationVar(&cfg.HousekeepingInterval, "housekeeping-interval", cfg.HousekeepingInterval, "Interval between container housekeepings")
	fs.BoolVar(&cfg.ExperimentalAllocatableIgnoreEviction, "experimental-allocatable-ignore-eviction", cfg.ExperimentalAllocatableIgnoreEviction, "Leave the hard eviction thresholds out of node allocatable. [default=false]")
	fs.StringVar(&cfg.ExperimentalMounterPath, "experimental-mounter-path", cfg.ExperimentalMounterPath, "[Experimental] Path of mounter binary. Leave empty to use the default mount.")
	fs.DurationVar(&cfg.MinimumGCAge, "minimum-container-ttl-duration", cfg.MinimumGCAge, "Minimum age for a finished container before it is garbage collected.  Examples: '300ms', '10s' or '2h45m'")
	fs.Int32Var(&cfg.MaxPerPodContainerCount, "maximum-dead-containers-per-container", cfg.MaxPerPodContainerCount, "Maximum number of old instances to retain per container.  Each container takes up some disk space.")
	fs.Int32Var(&cfg.MaxContainerCount, "maximum-dead-containers", cfg.MaxContainerCount, "Maximum number of old instances of containers to retain globally.  Each container takes up some disk space. To disable, set to a negative number.")
	// Deprecated as upstream's: shown in --help, a warning when used.
	for name, why := range map[string]string{
		"minimum-container-ttl-duration":               "Use --eviction-hard or --eviction-soft instead. Will be removed in a future version.",
		"maximum-dead-containers-per-container":        "Use --eviction-hard or --eviction-soft instead. Will be removed in a future version.",
		"maximum-dead-containers":                      "Use --eviction-hard or --eviction-soft instead. Will be removed in a future version.",
		"experimental-allocatable-ignore-eviction":     "will be removed in 1.25 or later.",
		"experimental-mounter-path":                    "will be removed in 1.25 or later. in favor of using CSI.",
		"experimental-dockershim-seccomp-profile-root": "it has no effect: a Localhost seccomp profile is read at the absolute host path the CRI request names (the kubelet's is under <root-dir>/seccomp).",
	} {
		fs.Lookup(name).Deprecated = why
	}
}

// addServerFlags binds the kubelet API's TLS, authentication and authorization
// flags (kubelet names; the KubeletConfiguration fields are the same settings).
func addServerFlags(fs *pflag.FlagSet, cfg *Config) {
	k := &cfg.Kubelet
	fs.Var(&ipFlag{ip: &k.Address}, "address", "IP address the kubelet API (HTTPS) listens on ('0.0.0.0' or '::' for every interface).")
	fs.Int32Var(&k.Port, "port", k.Port, "Port of the kubelet API (HTTPS).")
	fs.Int32Var(&k.ReadOnlyPort, "read-only-port", k.ReadOnlyPort, "Read-only port (0 disables it).")
	fs.StringVar(&k.TLSCertFile, "tls-cert-file", k.TLSCertFile, "x509 serving certificate of the kubelet API; with neither this nor serverTLSBootstrap a self-signed one is made in --cert-dir.")
	fs.StringVar(&k.TLSPrivateKeyFile, "tls-private-key-file", k.TLSPrivateKeyFile, "Private key of --tls-cert-file.")
	fs.StringSliceVar(&k.TLSCipherSuites, "tls-cipher-suites", k.TLSCipherSuites, "Comma-separated cipher suites of the kubelet API's TLS (Go's names); default Go's.")
	fs.StringVar(&k.TLSMinVersion, "tls-min-version", k.TLSMinVersion, "The lowest TLS version of the kubelet API: VersionTLS12 or VersionTLS13.")
	fs.DurationVar(&k.StreamingConnectionIdleTimeout.Duration, "streaming-connection-idle-timeout", k.StreamingConnectionIdleTimeout.Duration, "How long an exec, attach or port-forward connection may stay idle before it is closed.")
	fs.StringVar(&k.Authentication.X509.ClientCAFile, "client-ca-file", k.Authentication.X509.ClientCAFile, "CA bundle that signs the client certificates the kubelet API accepts.")
	fs.BoolVar(k.Authentication.Anonymous.Enabled, "anonymous-auth", *k.Authentication.Anonymous.Enabled, "Allow anonymous requests to the kubelet API.")
	fs.BoolVar(k.Authentication.Webhook.Enabled, "authentication-token-webhook", *k.Authentication.Webhook.Enabled, "Authenticate bearer tokens with TokenReview.")
	fs.DurationVar(&k.Authentication.Webhook.CacheTTL.Duration, "authentication-token-webhook-cache-ttl", k.Authentication.Webhook.CacheTTL.Duration, "How long TokenReview results are cached.")
	fs.StringVar((*string)(&k.Authorization.Mode), "authorization-mode", string(k.Authorization.Mode), "Authorization of the kubelet API: Webhook (SubjectAccessReview) or AlwaysAllow.")
	fs.DurationVar(&k.Authorization.Webhook.CacheAuthorizedTTL.Duration, "authorization-webhook-cache-authorized-ttl", k.Authorization.Webhook.CacheAuthorizedTTL.Duration, "How long allowed SubjectAccessReview results are cached.")
	fs.DurationVar(&k.Authorization.Webhook.CacheUnauthorizedTTL.Duration, "authorization-webhook-cache-unauthorized-ttl", k.Authorization.Webhook.CacheUnauthorizedTTL.Duration, "How long denied SubjectAccessReview results are cached.")
	fs.BoolVar(&k.RotateCertificates, "rotate-certificates", k.RotateCertificates, "Renew the client certificate through CSRs before it expires.")
	fs.BoolVar(&k.ServerTLSBootstrap, "rotate-server-certificates", k.ServerTLSBootstrap, "Request the serving certificate through a CSR (signer kubernetes.io/kubelet-serving) and renew it.")
}

// FinishFlags applies what binding cannot: -v's copy and the flag's feature
// gates merged over the file's.
func FinishFlags(fs *pflag.FlagSet, cfg *Config) error {
	cfg.Verbosity = int(cfg.Kubelet.Logging.Verbosity)
	if fs.Changed("feature-gates") {
		for name, v := range cfg.fileFeatureGates {
			if _, ok := cfg.Kubelet.FeatureGates[name]; !ok {
				cfg.Kubelet.FeatureGates[name] = v
			}
		}
	}
	applyDockerModeGates(cfg)
	return nil
}

// applyDockerModeGates turns EventedPLEG on in docker mode unless the flags
// or the configuration set it: a declared deviation from upstream (where the
// gate is alpha and off). The built-in shim's container events come from
// Docker's own event stream, which the shim follows and replays after a
// break, so the relist is only a safety net there (see the README). The
// setting is in the configuration: /configz and kubernetes_feature_enabled
// report the gate on.
func applyDockerModeGates(cfg *Config) {
	if cfg.ContainerRuntime != RuntimeDocker {
		return
	}
	if _, set := cfg.Kubelet.FeatureGates[string(features.EventedPLEG)]; set {
		return
	}
	if cfg.Kubelet.FeatureGates == nil {
		cfg.Kubelet.FeatureGates = map[string]bool{}
	}
	cfg.Kubelet.FeatureGates[string(features.EventedPLEG)] = true
}

// featureGatesUsage is upstream's --feature-gates help: the known gates, one
// per line.
func featureGatesUsage() string {
	known := "(none)"
	if fg, err := features.New(); err == nil {
		known = strings.Join(fg.KnownFeatures(), "\n")
	}
	return "A set of key=value pairs that describe feature gates for alpha/experimental features. Options are:\n" + known
}
