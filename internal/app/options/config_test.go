package options

import (
	"maps"
	"strings"
	"testing"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/kubelet-dockershim/kubelet/internal/app/kubeletconfig"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc  string
		mod   func(*Config)
		field string
	}{
		{"defaults", func(*Config) {}, ""},
		{"remote", func(c *Config) { c.ContainerRuntime = RuntimeRemote }, ""},
		{"bad runtime", func(c *Config) { c.ContainerRuntime = "rkt" }, "--container-runtime"},
		{"kubenet", func(c *Config) { c.NetworkPlugin = "kubenet" }, "--network-plugin=kubenet is not supported"},
		{"bad cgroup driver", func(c *Config) { c.Kubelet.CgroupDriver = "x" }, "cgroupDriver"},
		{"bad log format", func(c *Config) { c.Kubelet.Logging.Format = "xml" }, "logging.format"},
		{"negative v", func(c *Config) { c.Verbosity = -1 }, "-v"},
		{"zero timeout", func(c *Config) { c.Kubelet.RuntimeRequestTimeout.Duration = 0 }, "runtimeRequestTimeout"},
		{"empty endpoint", func(c *Config) { c.Kubelet.ContainerRuntimeEndpoint = "" }, "--container-runtime-endpoint"},
		{"relative static pod path", func(c *Config) { c.Kubelet.StaticPodPath = "manifests" }, "staticPodPath"},
		{"bad cluster dns", func(c *Config) { c.Kubelet.ClusterDNS = []string{"10.0.0.10", "x"} }, "clusterDNS[1]"},
		{"one log file", func(c *Config) { *c.Kubelet.ContainerLogMaxFiles = 1 }, "containerLogMaxFiles"},
		{"bad log size", func(c *Config) { c.Kubelet.ContainerLogMaxSize = "big" }, "containerLogMaxSize"},
		{"bad node ip", func(c *Config) { c.NodeIP = "1.2.3" }, "--node-ip"},
		{"bad streaming address", func(c *Config) { c.StreamingAddress = "nowhere" }, "--streaming-address"},
		{"streaming host:port", func(c *Config) { c.StreamingAddress = "127.0.0.1:10010" }, ""},
		// enforceNodeAllocatable and reservedSystemCPUs, with upstream's messages.
		{"enforce none", func(c *Config) { c.Kubelet.EnforceNodeAllocatable = []string{"none"} }, ""},
		{"enforce reserved with cgroups", func(c *Config) {
			c.Kubelet.EnforceNodeAllocatable = []string{"pods", "system-reserved", "kube-reserved-compressible"}
			c.Kubelet.SystemReservedCgroup, c.Kubelet.KubeReservedCgroup = "/system.slice", "/kube.slice"
		}, ""},
		{"enforce none and pods", func(c *Config) { c.Kubelet.EnforceNodeAllocatable = []string{"none", "pods"} },
			`invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) may not contain additional enforcements when "none" is specified`},
		{"enforce unknown", func(c *Config) { c.Kubelet.EnforceNodeAllocatable = []string{"pod"} },
			`invalid configuration: option "pod" specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are "pods", "system-reserved", "system-reserved-compressible", "kube-reserved", "kube-reserved-compressible" or "none"`},
		{"enforce duplicate", func(c *Config) { c.Kubelet.EnforceNodeAllocatable = []string{"pods", "pods"} },
			`invalid configuration: duplicated enforcements "pods" in enforceNodeAllocatable (--enforce-node-allocatable)`},
		{"system reserved without cgroup", func(c *Config) { c.Kubelet.EnforceNodeAllocatable = []string{"system-reserved"} },
			`invalid configuration: systemReservedCgroup (--system-reserved-cgroup) must be specified when "system-reserved" or "system-reserved-compressible" included in enforceNodeAllocatable (--enforce-node-allocatable)`},
		{"kube reserved both forms", func(c *Config) {
			c.Kubelet.EnforceNodeAllocatable = []string{"kube-reserved", "kube-reserved-compressible"}
			c.Kubelet.KubeReservedCgroup = "/kube.slice"
		}, `invalid configuration: both "kube-reserved" and "kube-reserved-compressible" cannot be specified together in enforceNodeAllocatable (--enforce-node-allocatable)`},
		{"reserved cpus", func(c *Config) { c.Kubelet.ReservedSystemCPUs = "0-1" }, ""},
		{"reserved cpus unparsable", func(c *Config) { c.Kubelet.ReservedSystemCPUs = "0-x" },
			"invalid configuration: unable to parse reservedSystemCPUs (--reserved-cpus) 0-x, error: "},
		{"reserved cpus with a reserved cgroup", func(c *Config) { c.Kubelet.ReservedSystemCPUs, c.Kubelet.KubeReservedCgroup = "0", "/kube.slice" },
			"invalid configuration: can't use reservedSystemCPUs (--reserved-cpus) with systemReservedCgroup (--system-reserved-cgroup) or kubeReservedCgroup (--kube-reserved-cgroup)"},
		// The topology manager's settings, with upstream's messages.
		{"topology policy", func(c *Config) {
			c.Kubelet.TopologyManagerPolicy, c.Kubelet.TopologyManagerScope = "single-numa-node", "pod"
		}, ""},
		{"unknown topology policy", func(c *Config) { c.Kubelet.TopologyManagerPolicy = "strict" },
			`invalid configuration: topologyManagerPolicy (--topology-manager-policy) "strict" must be one of: ["none" "best-effort" "restricted" "single-numa-node"]`},
		{"unknown topology scope", func(c *Config) { c.Kubelet.TopologyManagerScope = "node" },
			`invalid configuration: topologyManagerScope (--topology-manager-scope) "node" must be one of: "container", or "pod"`},
		// defaultPodSysctls: only with its gate, checked as upstream.
		{"default sysctls without the gate", func(c *Config) { c.Kubelet.DefaultPodSysctls = map[string]string{"kernel.shm_rmid_forced": "1"} },
			"invalid configuration: DefaultPodSysctls feature gate is required for Kubelet configuration option defaultPodSysctls"},
		{"default sysctls", func(c *Config) {
			c.Kubelet.FeatureGates = map[string]bool{"DefaultPodSysctls": true}
			c.Kubelet.DefaultPodSysctls = map[string]string{"kernel.shm_rmid_forced": "1"}
		}, ""},
		{"default sysctl not namespaced", func(c *Config) {
			c.Kubelet.FeatureGates = map[string]bool{"DefaultPodSysctls": true}
			c.Kubelet.DefaultPodSysctls = map[string]string{"vm.swappiness": "1"}
		}, `invalid configuration: "vm.swappiness" is not known to be namespaced for defaultPodSysctls`},
		// showHiddenMetricsForVersion: the previous minor version only.
		{"hidden metrics of 1.36", func(c *Config) { c.Kubelet.ShowHiddenMetricsForVersion = "1.36" }, ""},
		{"hidden metrics of 1.35", func(c *Config) { c.Kubelet.ShowHiddenMetricsForVersion = "1.35" },
			`invalid showHiddenMetricsForVersion: showHiddenMetricsForVersion: Invalid value: "1.35": must be omitted or have the value '1.36'; only the previous minor version is allowed`},
		{"qosReserved memory", func(c *Config) { c.Kubelet.QOSReserved = map[string]string{"memory": "50%"} }, ""},
		{"qosReserved cpu", func(c *Config) { c.Kubelet.QOSReserved = map[string]string{"cpu": "10%"} },
			`--qos-reserved value failed to parse: cannot reserve "cpu" resource`},
		{"qosReserved over 100%", func(c *Config) { c.Kubelet.QOSReserved = map[string]string{"memory": "150%"} },
			`--qos-reserved value failed to parse: failed to parse percentage "150%" for "memory" resource: percentage must be between 0 and 100`},
		{"qosReserved without %", func(c *Config) { c.Kubelet.QOSReserved = map[string]string{"memory": "50"} },
			`--qos-reserved value failed to parse: failed to parse percentage "50" for "memory" resource: percentage expected, got '50'`},
		{"swap limited", func(c *Config) { c.Kubelet.MemorySwap.SwapBehavior = "LimitedSwap" }, ""},
		{"swap unknown", func(c *Config) { c.Kubelet.MemorySwap.SwapBehavior = "UnlimitedSwap" },
			`invalid configuration: memorySwap.swapBehavior "UnlimitedSwap" must be one of: "", "LimitedSwap" or "NoSwap"`},
		// hairpinMode: only checked, as upstream.
		{"hairpin veth", func(c *Config) { c.Kubelet.HairpinMode = "hairpin-veth" }, ""},
		{"hairpin unknown", func(c *Config) { c.Kubelet.HairpinMode = "veth" },
			`invalid configuration: option "veth" specified for hairpinMode (--hairpin-mode). Valid options are "none", "hairpin-veth" or "promiscuous-bridge"`},
		// The iptables bits: only range-checked, as upstream.
		{"iptables bits", func(c *Config) { *c.Kubelet.IPTablesDropBit, *c.Kubelet.IPTablesMasqueradeBit = 0, 31 }, ""},
		{"iptables drop bit", func(c *Config) { *c.Kubelet.IPTablesDropBit = 32 },
			"invalid configuration: iptablesDropBit (--iptables-drop-bit) 32 must be between 0 and 31, inclusive"},
		{"iptables masquerade bit", func(c *Config) { *c.Kubelet.IPTablesMasqueradeBit = -1 },
			"invalid configuration: iptablesMasqueradeBit (--iptables-masquerade-bit) -1 must be between 0 and 31, inclusive"},
		// reservedMemory, with upstream's messages.
		{"reserved memory", func(c *Config) {
			c.Kubelet.ReservedMemory = []kubeletv1beta1.MemoryReservation{{NumaNode: 0, Limits: v1.ResourceList{"memory": resource.MustParse("1Gi"), "hugepages-2Mi": resource.MustParse("2Mi")}}}
		}, ""},
		{"reserved cpu", func(c *Config) {
			c.Kubelet.ReservedMemory = []kubeletv1beta1.MemoryReservation{{NumaNode: 1, Limits: v1.ResourceList{"cpu": resource.MustParse("1")}}}
		}, `invalid configuration: the limit type "cpu" for NUMA node 1 is not supported, only [memory hugepages-<HugePageSize>] is accepted`},
		{"reserved zero", func(c *Config) {
			c.Kubelet.ReservedMemory = []kubeletv1beta1.MemoryReservation{{NumaNode: 0, Limits: v1.ResourceList{"memory": resource.MustParse("0")}}}
		}, `invalid configuration: reserved memory may not be zero for NUMA node 0 and resource "memory"`},
		{"reserved twice", func(c *Config) {
			c.Kubelet.ReservedMemory = []kubeletv1beta1.MemoryReservation{{NumaNode: 0, Limits: v1.ResourceList{"memory": resource.MustParse("1Gi")}},
				{NumaNode: 0, Limits: v1.ResourceList{"memory": resource.MustParse("1Gi")}}}
		}, `invalid configuration: the reserved memory has a duplicate value for NUMA node 0 and resource "memory"`},
		// KubeletEnsureSecretPulledImages' settings, with upstream's messages.
		{"verification policy", func(c *Config) { c.Kubelet.ImagePullCredentialsVerificationPolicy = "AlwaysVerify" }, ""},
		{"unknown verification policy", func(c *Config) { c.Kubelet.ImagePullCredentialsVerificationPolicy = "Sometimes" },
			`invalid configuration: option "Sometimes" specified for imagePullCredentialsVerificationPolicy. Valid options are "NeverVerify", "NeverVerifyPreloadedImages", "NeverVerifyAllowlistedImages" or "AlwaysVerify"`},
		{"allowlist", func(c *Config) {
			c.Kubelet.ImagePullCredentialsVerificationPolicy = "NeverVerifyAllowlistedImages"
			c.Kubelet.PreloadedImagesVerificationAllowlist = []string{"registry.k8s.io/*", "docker.io/library/busybox"}
		}, ""},
		{"allowlist with another policy", func(c *Config) { c.Kubelet.PreloadedImagesVerificationAllowlist = []string{"registry.k8s.io/*"} },
			"invalid configuration: can't set `preloadedImagesVerificationAllowlist` if `imagePullCredentialsVertificationPolicy` is not \"NeverVerifyAllowlistedImages\""},
		{"allowlist with a tag", func(c *Config) {
			c.Kubelet.ImagePullCredentialsVerificationPolicy = "NeverVerifyAllowlistedImages"
			c.Kubelet.PreloadedImagesVerificationAllowlist = []string{"registry.k8s.io/pause:3.10"}
		}, "invalid configuration: invalid image pattern in `preloadedImagesVerificationAllowlist`: neither tag nor digest is accepted in an image reference: registry.k8s.io/pause:3.10"},
		// logging: upstream's checks of vmodule and the alpha options.
		{"vmodule", func(c *Config) {
			c.Kubelet.Logging.VModule = logsapi.VModuleConfiguration{{FilePattern: "worker*", Verbosity: 4}}
		}, ""},
		{"vmodule with json", func(c *Config) {
			c.Kubelet.Logging.Format = "json"
			c.Kubelet.Logging.VModule = logsapi.VModuleConfiguration{{FilePattern: "worker", Verbosity: 4}}
		}, "logging.vmodule: Forbidden: Only supported for text log format"},
		{"vmodule pattern with a comma", func(c *Config) {
			c.Kubelet.Logging.VModule = logsapi.VModuleConfiguration{{FilePattern: "a,b", Verbosity: 4}}
		},
			`logging.vmodule[0]: Invalid value: "a,b": File pattern must not contain equal sign or comma`},
		{"split stream without the gate", func(c *Config) { c.Kubelet.Logging.Options.Text.SplitStream = true },
			"logging.options.text.splitStream: Forbidden: Feature LoggingAlphaOptions is disabled"},
		{"split stream and buffer", func(c *Config) {
			c.Kubelet.FeatureGates = map[string]bool{"LoggingAlphaOptions": true}
			c.Kubelet.Logging.Format = "json"
			c.Kubelet.Logging.Options.JSON.SplitStream = true
			c.Kubelet.Logging.Options.JSON.InfoBufferSize = resource.QuantityValue{Quantity: resource.MustParse("64Ki")}
		}, ""},
		{"verification policy without the gate", func(c *Config) {
			c.Kubelet.FeatureGates = map[string]bool{"KubeletEnsureSecretPulledImages": false}
			c.Kubelet.ImagePullCredentialsVerificationPolicy = "AlwaysVerify"
		}, "invalid configuration: `imagePullCredentialsVerificationPolicy` must not be set if KubeletEnsureSecretPulledImages feature gate is not enabled"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			c := DefaultConfig()
			tc.mod(&c)
			err := c.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("Validate() = %v, want an error naming %s", err, tc.field)
			}
		})
	}
}

func TestStreamingListenAddrAndBinDirs(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	if a, err := c.StreamingListenAddr(); err != nil || a != "127.0.0.1:0" {
		t.Fatalf("default streaming addr %q %v", a, err)
	}
	c.CNIBinDir = "/opt/cni/bin, /usr/lib/cni,,"
	if got := c.CNIBinDirs(); len(got) != 2 || got[1] != "/usr/lib/cni" {
		t.Fatalf("CNIBinDirs = %v", got)
	}
}

// --reserved-cpus replaces the cpu of both reservations, as upstream.
func TestApplyReservedCPUs(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	c.Kubelet.ReservedSystemCPUs = "0,2-3"
	c.Kubelet.KubeReserved = map[string]string{"cpu": "500m", "memory": "1Gi"}
	kubeletconfig.ApplyReservedCPUs(&c.Kubelet, zap.NewNop())
	if c.Kubelet.SystemReserved["cpu"] != "3" || len(c.Kubelet.SystemReserved) != 1 {
		t.Errorf("systemReserved = %v, want cpu=3 alone", c.Kubelet.SystemReserved)
	}
	if _, ok := c.Kubelet.KubeReserved["cpu"]; ok || c.Kubelet.KubeReserved["memory"] != "1Gi" {
		t.Errorf("kubeReserved = %v, want memory=1Gi alone", c.Kubelet.KubeReserved)
	}
	d := DefaultConfig()
	kubeletconfig.ApplyReservedCPUs(&d.Kubelet, zap.NewNop())
	if d.Kubelet.SystemReserved != nil {
		t.Errorf("without --reserved-cpus systemReserved = %v", d.Kubelet.SystemReserved)
	}
}

// TestDockerModeGates: docker mode turns EventedPLEG on unless it is set
// (either way); remote mode keeps upstream's default.
func TestDockerModeGates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc    string
		runtime string
		gates   map[string]bool
		want    map[string]bool
	}{
		{"docker, unset", RuntimeDocker, nil, map[string]bool{"EventedPLEG": true}},
		{"docker, set off", RuntimeDocker, map[string]bool{"EventedPLEG": false}, map[string]bool{"EventedPLEG": false}},
		{"docker, other gates kept", RuntimeDocker, map[string]bool{"AllAlpha": false}, map[string]bool{"AllAlpha": false, "EventedPLEG": true}},
		{"remote", RuntimeRemote, nil, nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			cfg := DefaultConfig()
			cfg.ContainerRuntime, cfg.Kubelet.FeatureGates = tc.runtime, tc.gates
			applyDockerModeGates(&cfg)
			if !maps.Equal(cfg.Kubelet.FeatureGates, tc.want) {
				t.Errorf("feature gates %v, want %v", cfg.Kubelet.FeatureGates, tc.want)
			}
			fg, err := cfg.FeatureGate()
			if err != nil {
				t.Fatal(err)
			}
			if got := fg.Enabled("EventedPLEG"); got != (tc.want["EventedPLEG"]) {
				t.Errorf("EventedPLEG enabled = %v, want %v", got, tc.want["EventedPLEG"])
			}
		})
	}
}
