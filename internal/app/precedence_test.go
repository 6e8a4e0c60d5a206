package app

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// parseConfig runs the real flag parsing up to validation and returns the config.
func parseConfig(t *testing.T, args []string) (Config, error) {
	t.Helper()
	cfg, err := baseConfig(args)
	if err != nil {
		return cfg, err
	}
	cmd := &cobra.Command{Use: "kubelet", SilenceErrors: true, SilenceUsage: true, RunE: func(cmd *cobra.Command, _ []string) error {
		if err := finishFlags(cmd.Flags(), &cfg); err != nil {
			return err
		}
		return cfg.Validate()
	}}
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	addFlags(cmd.Flags(), &cfg)
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
				c.Kubelet.ContainerRuntimeEndpoint != defaultRuntimeEndpoint || c.Kubelet.ContainerLogMaxSize != "10Mi" {
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
