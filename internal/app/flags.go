package app

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/kubelet-dockershim/kubelet/internal/features"
)

// addFlags binds the kubelet-compatible flags. Flag-only settings go to cfg's own
// fields; flags of KubeletConfiguration fields bind straight onto cfg.Kubelet, which
// already holds the defaults and the --config file, so parsing applies flags last.
func addFlags(fs *pflag.FlagSet, cfg *Config) {
	addRuntimeFlags(fs, cfg)
	addNodeFlags(fs, cfg)
	addServerFlags(fs, cfg)
	k := &cfg.Kubelet
	fs.Var(cliflag.NewMapStringBool(&k.FeatureGates), "feature-gates", featureGatesUsage())
	fs.StringVar(&k.StaticPodPath, "pod-manifest-path", k.StaticPodPath, "Path to the directory (or file) of static pod manifests.")
	fs.StringVar(&k.StaticPodURL, "manifest-url", k.StaticPodURL, "URL to fetch static pod manifests from.")
	fs.DurationVar(&k.FileCheckFrequency.Duration, "file-check-frequency", k.FileCheckFrequency.Duration, "How often the manifest directory is re-read in full.")
	fs.DurationVar(&k.HTTPCheckFrequency.Duration, "http-check-frequency", k.HTTPCheckFrequency.Duration, "How often --manifest-url is fetched.")
	fs.DurationVar(&k.SyncFrequency.Duration, "sync-frequency", k.SyncFrequency.Duration, "Max period between syncs of a running pod.")
	fs.StringVar(&k.CgroupDriver, "cgroup-driver", k.CgroupDriver, "The kubelet's cgroup driver: cgroupfs or systemd (must match the runtime's).")
	fs.StringVar(&k.CgroupRoot, "cgroup-root", k.CgroupRoot, "The cgroup the node-allocatable cgroup (kubepods) is made under; \"\" is the root, /.")
	fs.BoolVar(k.CgroupsPerQOS, "cgroups-per-qos", *k.CgroupsPerQOS, "Make the kubepods, QoS (burstable, besteffort) and per-pod cgroups and run each pod in its own.")
	fs.Int64Var(k.PodPidsLimit, "pod-max-pids", *k.PodPidsLimit, "The pids.max of every pod cgroup; -1 (or any value <= 0) sets none, so pods share the node-allocatable limit.")
	fs.DurationVar(&k.CPUCFSQuotaPeriod.Duration, "cpu-cfs-quota-period", k.CPUCFSQuotaPeriod.Duration, "The CFS period (cpu.cfs_period_us) CPU limits are enforced over.")
	addReservationFlags(fs, cfg)
	addEvictionFlags(fs, cfg)
	fs.StringVar(&k.CPUManagerPolicy, "cpu-manager-policy", k.CPUManagerPolicy, "The CPU manager policy: none or static (exclusive CPUs for Guaranteed pods with whole-CPU requests; state in <root-dir>/cpu_manager_state).")
	fs.Var(cliflag.NewMapStringString(&k.CPUManagerPolicyOptions), "cpu-manager-policy-options", "Options of the CPU manager policy (key=value,...).")
	fs.DurationVar(&k.CPUManagerReconcilePeriod.Duration, "cpu-manager-reconcile-period", k.CPUManagerReconcilePeriod.Duration, "How often the CPU manager brings containers' cpusets up to date.")
	fs.DurationVar(&k.RuntimeRequestTimeout.Duration, "runtime-request-timeout", k.RuntimeRequestTimeout.Duration, "Timeout of every CRI request except long-running ones.")
	fs.StringSliceVar(&k.ClusterDNS, "cluster-dns", k.ClusterDNS, "Comma-separated DNS server IPs for pods with dnsPolicy ClusterFirst.")
	fs.StringVar(&k.ClusterDomain, "cluster-domain", k.ClusterDomain, "The cluster's DNS domain (e.g. cluster.local).")
	fs.StringVar(k.ResolverConfig, "resolv-conf", *k.ResolverConfig, "The resolv.conf pods with dnsPolicy Default inherit (\"\" for none).")
	fs.StringVar(&k.ContainerLogMaxSize, "container-log-max-size", k.ContainerLogMaxSize, "Rotate a container's log when it grows past this size.")
	fs.Int32Var(k.ContainerLogMaxFiles, "container-log-max-files", *k.ContainerLogMaxFiles, "Log files kept per container, the live one included.")
	fs.Int32Var(&k.MaxPods, "max-pods", k.MaxPods, "The number of pods this kubelet can run.")
	fs.Int32Var(k.HealthzPort, "healthz-port", *k.HealthzPort, "Port of the localhost healthz endpoint (0 disables it).")
	fs.StringVar(&k.HealthzBindAddress, "healthz-bind-address", k.HealthzBindAddress, "IP address of the healthz endpoint.")
	fs.BoolVar(k.FailSwapOn, "fail-swap-on", *k.FailSwapOn, "Accepted for compatibility; swap is not checked.")
	fs.BoolVar(k.RegisterNode, "register-node", *k.RegisterNode, "Register the node with the API server.")
	fs.BoolVar(k.SerializeImagePulls, "serialize-image-pulls", *k.SerializeImagePulls, "Pull images one at a time.")
	fs.BoolVar(k.CPUCFSQuota, "cpu-cfs-quota", *k.CPUCFSQuota, "Enforce CPU limits with CFS quota.")
	fs.StringVar(&k.Address, "address", k.Address, "IP address the kubelet API (HTTPS) listens on.")
	fs.Int32Var(&k.Port, "port", k.Port, "Port of the kubelet API (HTTPS).")
	fs.Int32Var(&k.ReadOnlyPort, "read-only-port", k.ReadOnlyPort, "Read-only port (0 disables it).")
	fs.StringVar(&k.Logging.Format, "logging-format", k.Logging.Format, "Log format: text or json.")
	fs.IntVarP(&cfg.Verbosity, "v", "v", int(k.Logging.Verbosity), "Log verbosity (4 and above logs debug messages).")
	fs.BoolVar(&cfg.ShowVersion, "version", false, "Print the version and exit.")
	fs.StringVar(&cfg.ConfigFile, "config", cfg.ConfigFile, "Path to a KubeletConfiguration (kubelet.config.k8s.io/v1beta1) file; flags override it.")
}

// addReservationFlags binds node allocatable's flags: what is held back for
// the system and the kubelet, the hard eviction thresholds, and where the
// reservations are enforced (upstream's names and map syntaxes).
func addReservationFlags(fs *pflag.FlagSet, cfg *Config) {
	k := &cfg.Kubelet
	fs.Var(cliflag.NewMapStringString(&k.SystemReserved), "system-reserved", "Resources reserved for non-Kubernetes components, as name=quantity pairs (e.g. cpu=200m,memory=500Mi,ephemeral-storage=1Gi,pid=100): cpu, memory, ephemeral-storage and pid.")
	fs.Var(cliflag.NewMapStringString(&k.KubeReserved), "kube-reserved", "Resources reserved for Kubernetes system components (the kubelet, the runtime), as name=quantity pairs (e.g. cpu=200m,memory=500Mi,ephemeral-storage=1Gi,pid=100).")
	fs.StringSliceVar(&k.EnforceNodeAllocatable, "enforce-node-allocatable", k.EnforceNodeAllocatable, "Where node allocatable is enforced: none, or any of pods, system-reserved, system-reserved-compressible, kube-reserved, kube-reserved-compressible (the reserved ones need --system-reserved-cgroup / --kube-reserved-cgroup).")
	fs.StringVar(&k.SystemReservedCgroup, "system-reserved-cgroup", k.SystemReservedCgroup, "Absolute name of the existing cgroup that --system-reserved is enforced on.")
	fs.StringVar(&k.KubeReservedCgroup, "kube-reserved-cgroup", k.KubeReservedCgroup, "Absolute name of the existing cgroup that --kube-reserved is enforced on.")
	fs.StringVar(&k.ReservedSystemCPUs, "reserved-cpus", k.ReservedSystemCPUs, "A CPU list (e.g. 0,1 or 0-3) reserved for the system and Kubernetes system daemons; it overrides the cpu of --system-reserved and --kube-reserved.")
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
	fs.DurationVar(&cfg.MinimumGCAge, "minimum-container-ttl-duration", cfg.MinimumGCAge, "Minimum age for a finished container before it is garbage collected.  Examples: '300ms', '10s' or '2h45m'")
	fs.Int32Var(&cfg.MaxPerPodContainerCount, "maximum-dead-containers-per-container", cfg.MaxPerPodContainerCount, "Maximum number of old instances to retain per container.  Each container takes up some disk space.")
	fs.Int32Var(&cfg.MaxContainerCount, "maximum-dead-containers", cfg.MaxContainerCount, "Maximum number of old instances of containers to retain globally.  Each container takes up some disk space. To disable, set to a negative number.")
	for _, name := range []string{"minimum-container-ttl-duration", "maximum-dead-containers-per-container", "maximum-dead-containers"} {
		_ = fs.MarkDeprecated(name, "Use --eviction-hard or --eviction-soft instead. Will be removed in a future version.")
	}
}

// addRuntimeFlags binds the container runtime and dockershim flags.
func addRuntimeFlags(fs *pflag.FlagSet, cfg *Config) {
	k := &cfg.Kubelet
	fs.StringVar(&cfg.ContainerRuntime, "container-runtime", cfg.ContainerRuntime, "The container runtime: docker (built-in dockershim) or remote (a CRI endpoint).")
	fs.BoolVar(&cfg.ExperimentalDockershim, "experimental-dockershim", cfg.ExperimentalDockershim, "Run only the dockershim CRI server on --container-runtime-endpoint and nothing else.")
	fs.StringVar(&k.ContainerRuntimeEndpoint, "container-runtime-endpoint", k.ContainerRuntimeEndpoint, "The CRI endpoint: where the built-in dockershim serves, or the remote runtime to dial.")
	fs.StringVar(&k.ImageServiceEndpoint, "image-service-endpoint", k.ImageServiceEndpoint, "The CRI image service endpoint (defaults to --container-runtime-endpoint).")
	fs.StringVar(&cfg.DockerEndpoint, "docker-endpoint", cfg.DockerEndpoint, "The Docker daemon endpoint.")
	fs.StringVar(&cfg.PodInfraContainerImage, "pod-infra-container-image", cfg.PodInfraContainerImage, "The image of each pod's sandbox (pause) container.")
	fs.StringVar(&cfg.DockershimRootDirectory, "experimental-dockershim-root-directory", cfg.DockershimRootDirectory, "The dockershim's state directory (sandbox checkpoints).")
	fs.StringVar(&cfg.SeccompProfileRoot, "experimental-dockershim-seccomp-profile-root", cfg.SeccompProfileRoot, "The only directory the dockershim reads Localhost seccomp profiles from (default <root-dir>/seccomp, where the kubelet resolves them).")
	fs.StringVar(&cfg.NetworkPlugin, "network-plugin", cfg.NetworkPlugin, "The network plugin: cni.")
	fs.StringVar(&cfg.CNIBinDir, "cni-bin-dir", cfg.CNIBinDir, "Comma-separated directories holding CNI plugin binaries.")
	fs.StringVar(&cfg.CNIConfDir, "cni-conf-dir", cfg.CNIConfDir, "The directory holding CNI network configs; the first in lexical order is the pod network.")
	fs.StringVar(&cfg.CNICacheDir, "cni-cache-dir", cfg.CNICacheDir, "The CNI cache directory.")
	fs.DurationVar(&cfg.ImagePullProgressDeadline, "image-pull-progress-deadline", cfg.ImagePullProgressDeadline, "Cancel an image pull that makes no progress for this long.")
	fs.StringVar(&cfg.RuntimeCgroups, "runtime-cgroups", cfg.RuntimeCgroups, "Optional absolute name of the cgroup to put the container runtime in.")
	fs.StringVar(&cfg.StreamingAddress, "streaming-address", cfg.StreamingAddress, "The address (IP, or IP:port) the exec/attach/port-forward streaming server binds to.")
}

// addNodeFlags binds the node identity and cluster flags kubeadm passes.
func addNodeFlags(fs *pflag.FlagSet, cfg *Config) {
	fs.StringVar(&cfg.RootDirectory, "root-dir", cfg.RootDirectory, "The kubelet's state directory (pod volumes, plugins).")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", cfg.Kubeconfig, "Path to a kubeconfig for the API server.")
	fs.StringVar(&cfg.BootstrapKubeconfig, "bootstrap-kubeconfig", cfg.BootstrapKubeconfig, "Path to a bootstrap kubeconfig for TLS bootstrapping.")
	fs.StringVar(&cfg.HostnameOverride, "hostname-override", cfg.HostnameOverride, "The node name to use instead of the hostname.")
	fs.StringVar(&cfg.NodeIP, "node-ip", cfg.NodeIP, "IP address(es) of the node (comma separated for dual stack).")
	fs.StringToStringVar(&cfg.NodeLabels, "node-labels", cfg.NodeLabels, "Labels to add when registering the node (key=value,...).")
	fs.StringVar(&cfg.RegisterWithTaints, "register-with-taints", cfg.RegisterWithTaints, "Taints to register the node with (key=value:Effect,...).")
}

// addServerFlags binds the kubelet API's TLS, authentication and authorization
// flags (kubelet names; the KubeletConfiguration fields are the same settings).
func addServerFlags(fs *pflag.FlagSet, cfg *Config) {
	k := &cfg.Kubelet
	fs.StringVar(&k.TLSCertFile, "tls-cert-file", k.TLSCertFile, "x509 serving certificate of the kubelet API; with neither this nor serverTLSBootstrap a self-signed one is made in <root-dir>/pki.")
	fs.StringVar(&k.TLSPrivateKeyFile, "tls-private-key-file", k.TLSPrivateKeyFile, "Private key of --tls-cert-file.")
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

// finishFlags applies what binding cannot: -v and --register-with-taints.
func finishFlags(fs *pflag.FlagSet, cfg *Config) error {
	if fs.Changed("v") {
		if cfg.Verbosity < 0 {
			return fmt.Errorf("-v=%d must not be negative", cfg.Verbosity)
		}
		cfg.Kubelet.Logging.Verbosity = logsapi.VerbosityLevel(cfg.Verbosity)
	}
	cfg.Verbosity = int(cfg.Kubelet.Logging.Verbosity)
	if fs.Changed("register-with-taints") {
		taints, err := parseTaints(cfg.RegisterWithTaints)
		if err != nil {
			return err
		}
		cfg.Kubelet.RegisterWithTaints = taints
	}
	if fs.Changed("feature-gates") {
		for name, v := range cfg.fileFeatureGates {
			if _, ok := cfg.Kubelet.FeatureGates[name]; !ok {
				cfg.Kubelet.FeatureGates[name] = v
			}
		}
	}
	return nil
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

// configFileFromArgs finds --config in args before the full parse, so that the file is
// loaded first and every flag then overrides it.
func configFileFromArgs(args []string) (string, error) {
	fs := pflag.NewFlagSet("config", pflag.ContinueOnError)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	fs.SetOutput(discard{})
	fs.Usage = func() {}
	path := fs.String("config", "", "")
	fs.BoolP("help", "h", false, "")
	if err := fs.Parse(args); err != nil {
		return "", nil // the full parse reports flag errors
	}
	return *path, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
