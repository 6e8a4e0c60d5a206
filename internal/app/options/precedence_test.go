package options

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubelet-dockershim/kubelet/internal/app/kubeletconfig"
)

// parseConfig runs the real flag parsing up to validation and returns the config.
func parseConfig(t *testing.T, args []string) (Config, error) {
	t.Helper()
	cfg, err := Base(args)
	if err != nil {
		return cfg, err
	}
	cmd := &cobra.Command{Use: "kubelet", SilenceErrors: true, SilenceUsage: true, RunE: func(cmd *cobra.Command, _ []string) error {
		if err := FinishFlags(cmd.Flags(), &cfg); err != nil {
			return err
		}
		return cfg.Validate()
	}}
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	AddFlags(cmd.Flags(), &cfg)
	err = cmd.ExecuteContext(context.Background())
	return cfg, err
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func TestConfigPrecedence(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, header+`staticPodPath: /etc/kubernetes/manifests
clusterDomain: file.local
clusterDNS: [10.96.0.10]
containerLogMaxFiles: 3
syncFrequency: 30s
maxPods: 50
logging:
  format: json
`)
	for _, tc := range []struct {
		desc  string
		args  []string
		check func(t *testing.T, c Config)
	}{
		{"defaults only", nil, func(t *testing.T, c Config) {
			if c.Kubelet.MaxPods != 110 || c.Kubelet.SyncFrequency.Duration != time.Minute || *c.Kubelet.HealthzPort != 10248 ||
				c.Kubelet.ContainerRuntimeEndpoint != kubeletconfig.DefaultRuntimeEndpoint || c.Kubelet.ContainerLogMaxSize != "10Mi" {
				t.Fatalf("defaults: %+v", c.Kubelet)
			}
		}},
		{"file over defaults", []string{"--config", file}, func(t *testing.T, c Config) {
			if c.Kubelet.StaticPodPath != "/etc/kubernetes/manifests" || c.Kubelet.MaxPods != 50 || *c.Kubelet.ContainerLogMaxFiles != 3 ||
				c.Kubelet.SyncFrequency.Duration != 30*time.Second || c.Kubelet.Logging.Format != "json" {
				t.Fatalf("file: %+v", c.Kubelet)
			}
			if *c.Kubelet.HealthzPort != 10248 || c.Kubelet.ContainerLogMaxSize != "10Mi" {
				t.Fatal("defaults lost for fields the file does not set")
			}
		}},
		{"flags over file", []string{"--config=" + file, "--max-pods=7", "--cluster-domain=flag.local", "--container-log-max-files=4", "--logging-format=text", "-v=5"}, func(t *testing.T, c Config) {
			if c.Kubelet.MaxPods != 7 || c.Kubelet.ClusterDomain != "flag.local" || *c.Kubelet.ContainerLogMaxFiles != 4 ||
				c.Kubelet.Logging.Format != "text" || c.Verbosity != 5 || c.Kubelet.Logging.Verbosity != 5 {
				t.Fatalf("flags: %+v", c.Kubelet)
			}
			if c.Kubelet.StaticPodPath != "/etc/kubernetes/manifests" || len(c.Kubelet.ClusterDNS) != 1 {
				t.Fatal("file values lost for fields no flag sets")
			}
		}},
		{"flag order does not matter", []string{"--max-pods=9", "--config", file}, func(t *testing.T, c Config) {
			if c.Kubelet.MaxPods != 9 {
				t.Fatalf("maxPods %d", c.Kubelet.MaxPods)
			}
		}},
		{"reservation flags", []string{"--config", file, "--kube-reserved=cpu=200m,memory=500Mi", "--system-reserved=memory=1Gi,pid=100",
			"--eviction-hard=memory.available<300Mi,nodefs.available<5%", "--enforce-node-allocatable=pods,kube-reserved",
			"--kube-reserved-cgroup=/kube.slice"}, func(t *testing.T, c Config) {
			k := c.Kubelet
			if k.KubeReserved["cpu"] != "200m" || k.KubeReserved["memory"] != "500Mi" || k.SystemReserved["pid"] != "100" ||
				k.KubeReservedCgroup != "/kube.slice" ||
				strings.Join(k.EnforceNodeAllocatable, ",") != "pods,kube-reserved" {
				t.Fatalf("reservations: %+v", k)
			}
			// A partial --eviction-hard replaces the defaults (no imagefs.available).
			if len(k.EvictionHard) != 2 || k.EvictionHard["memory.available"] != "300Mi" || k.EvictionHard["nodefs.available"] != "5%" {
				t.Fatalf("evictionHard %v", k.EvictionHard)
			}
		}},
		{"taints", []string{"--register-with-taints=a=b:NoSchedule,c:NoExecute"}, func(t *testing.T, c Config) {
			if len(c.Kubelet.RegisterWithTaints) != 2 || c.Kubelet.RegisterWithTaints[1].Key != "c" {
				t.Fatalf("taints %+v", c.Kubelet.RegisterWithTaints)
			}
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c, err := parseConfig(t, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestConfigFileErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc, body, want string
		extra            []string
	}{
		{"unknown field", header + "noSuchField: 1\n", `unknown field "noSuchField"`, nil},
		{"wrong kind", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: Pod\n", "apiVersion/kind", nil},
		{"bad type", header + "maxPods: many\n", "maxPods", nil},
		{"invalid value", header + "cgroupDriver: fancy\n", "cgroupDriver", nil},
		{"bad taint flag", header, "--register-with-taints", []string{"--register-with-taints=a=b"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := parseConfig(t, append([]string{"--config", writeConfig(t, tc.body)}, tc.extra...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to name %q", err, tc.want)
			}
		})
	}
	if _, err := parseConfig(t, []string{"--config", "/nonexistent/kubelet.yaml"}); err == nil || !strings.Contains(err.Error(), "--config") {
		t.Fatalf("missing file: %v", err)
	}
}

// TestEvictionDefaults: as upstream, evictionHard's defaults come with a
// config file only: all of them when the file sets none, a partial map
// replaces them unless mergeDefaultEvictionSettings, and a kubelet run from
// flags alone has no hard threshold.
func TestEvictionDefaults(t *testing.T) {
	t.Parallel()
	all := map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%",
		"imagefs.available": "15%", "imagefs.inodesFree": "5%"}
	merged := map[string]string{"memory.available": "1Gi", "nodefs.available": "10%", "nodefs.inodesFree": "5%",
		"imagefs.available": "15%", "imagefs.inodesFree": "5%"}
	for _, tc := range []struct {
		desc string
		args []string
		want map[string]string
	}{
		{"flags only", nil, nil},
		{"file without evictionHard", []string{"--config", writeConfig(t, header)}, all},
		{"partial map replaces", []string{"--config", writeConfig(t, header+"evictionHard: {memory.available: 1Gi}\n")},
			map[string]string{"memory.available": "1Gi"}},
		{"partial map merged", []string{"--config", writeConfig(t, header+"mergeDefaultEvictionSettings: true\nevictionHard: {memory.available: 1Gi}\n")}, merged},
		{"flag replaces the file's", []string{"--config", writeConfig(t, header), "--eviction-hard=pid.available<100"},
			map[string]string{"pid.available": "100"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c, err := parseConfig(t, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Kubelet.EvictionHard) != len(tc.want) {
				t.Fatalf("evictionHard = %v, want %v", c.Kubelet.EvictionHard, tc.want)
			}
			for k, v := range tc.want {
				if c.Kubelet.EvictionHard[k] != v {
					t.Fatalf("evictionHard = %v, want %v", c.Kubelet.EvictionHard, tc.want)
				}
			}
		})
	}
}

// TestGCFlags: the image and container GC flags reach the config, and bad
// values fail with upstream's messages.
func TestGCFlags(t *testing.T) {
	t.Parallel()
	c, err := parseConfig(t, []string{"--image-gc-high-threshold=70", "--image-gc-low-threshold=60", "--minimum-image-ttl-duration=1m",
		"--node-status-max-images=-1", "--maximum-dead-containers-per-container=2", "--maximum-dead-containers=10",
		"--minimum-container-ttl-duration=5s", "--eviction-soft=memory.available<1Gi", "--eviction-soft-grace-period=memory.available=30s",
		"--eviction-max-pod-grace-period=20", "--eviction-minimum-reclaim=memory.available=100Mi", "--kernel-memcg-notification"})
	if err != nil {
		t.Fatal(err)
	}
	k := c.Kubelet
	if *k.ImageGCHighThresholdPercent != 70 || *k.ImageGCLowThresholdPercent != 60 || k.ImageMinimumGCAge.Duration != time.Minute ||
		*k.NodeStatusMaxImages != -1 || c.MaxPerPodContainerCount != 2 || c.MaxContainerCount != 10 || c.MinimumGCAge != 5*time.Second ||
		k.EvictionSoft["memory.available"] != "1Gi" || k.EvictionSoftGracePeriod["memory.available"] != "30s" ||
		k.EvictionMaxPodGracePeriod != 20 || k.EvictionMinimumReclaim["memory.available"] != "100Mi" || !k.KernelMemcgNotification {
		t.Fatalf("gc flags: %+v %+v", c, k)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--image-gc-high-threshold=101"}, "imageGCHighThresholdPercent (--image-gc-high-threshold) 101 must be between 0 and 100, inclusive"},
		{[]string{"--image-gc-low-threshold=90"}, "imageGCLowThresholdPercent (--image-gc-low-threshold) 90 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 85"},
		{[]string{"--node-status-max-images=-2"}, "nodeStatusMaxImages (--node-status-max-images) -2 must be -1 or greater"},
		{[]string{"--minimum-container-ttl-duration=-1s"}, "invalid minimum garbage collection age: -1s"},
		{[]string{"--eviction-hard=memory.available"}, "malformed pair, expect string<string"},
	} {
		if _, err := parseConfig(t, tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestFeatureGates: --feature-gates and featureGates are the upstream
// kubelet's gates: the flag is merged over the file per gate (as upstream),
// an unknown or locked gate fails with upstream's error.
func TestFeatureGates(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, header+"featureGates: {EventedPLEG: true, HugepageAwareEviction: false}\n")
	c, err := parseConfig(t, []string{"--config", file, "--feature-gates=HugepageAwareEviction=true,AllAlpha=false"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"EventedPLEG": true, "HugepageAwareEviction": true, "AllAlpha": false}
	if len(c.Kubelet.FeatureGates) != len(want) {
		t.Fatalf("featureGates = %v, want %v", c.Kubelet.FeatureGates, want)
	}
	for k, v := range want {
		if c.Kubelet.FeatureGates[k] != v {
			t.Fatalf("featureGates = %v, want %v", c.Kubelet.FeatureGates, want)
		}
	}
	for _, tc := range []struct{ arg, want string }{
		{"--feature-gates=NoSuchGate=true", "failed to set feature gates from initial flags-based config: unrecognized feature gate: NoSuchGate"},
		{"--feature-gates=AggregatedDiscoveryRemoveBetaType=false", "feature is locked to true"},
		{"--feature-gates=EventedPLEG=maybe", "invalid value of EventedPLEG"},
	} {
		if _, err := parseConfig(t, []string{tc.arg}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.arg, err, tc.want)
		}
	}
}
