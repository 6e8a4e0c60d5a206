package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"k8s.io/utils/ptr"

	"github.com/kubelet-dockershim/kubelet/internal/app/options"
)

func TestPrepareProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	noSwap := filepath.Join(dir, "swaps-none")
	withSwap := filepath.Join(dir, "swaps")
	header := "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
	for p, body := range map[string]string{noSwap: header, withSwap: header + "/swapfile file 1048572 0 -2\n"} {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		desc    string
		mod     func(*Config)
		swaps   string
		wantErr string
	}{
		{"defaults, no swap", func(*Config) {}, noSwap, ""},
		{"swap on", func(*Config) {}, withSwap, "running with swap on is not supported, please disable swap or set --fail-swap-on flag to false"},
		{"swap on allowed", func(c *Config) { *c.Kubelet.FailSwapOn = false }, withSwap, ""},
		{"runOnce", func(c *Config) { c.Kubelet.RunOnce = true }, noSwap, "no run-once mode"},
		{"cgroup v1 refused", func(c *Config) { *c.Kubelet.FailCgroupV1 = true }, noSwap, "kubelet is configured to not run on a host using cgroup v1"},
		{"singleProcessOOMKill false on cgroup v1", func(c *Config) { c.Kubelet.SingleProcessOOMKill = ptr.To(false) }, noSwap,
			"invalid configuration: singleProcessOOMKill must not be explicitly set to false when using cgroup v1"},
		{"singleProcessOOMKill true on cgroup v1", func(c *Config) { c.Kubelet.SingleProcessOOMKill = ptr.To(true) }, noSwap, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			c := Config{Config: options.DefaultConfig()}
			c.Kubelet.MaxOpenFiles = 0 // leave the test process's limit alone
			tc.mod(&c)
			oom := filepath.Join(t.TempDir(), "oom_score_adj")
			h := hostFiles{CgroupRoot: dir, Swaps: tc.swaps, OOMScoreAdj: oom, ProcSys: fakeProcSys(t, nil)}
			err := prepareProcess(&c, h, zap.NewNop())
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if b, err := os.ReadFile(oom); err != nil || string(b) != "-999" {
					t.Fatalf("oom_score_adj %q %v, want -999", b, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// A refused oom_score_adj is logged, not fatal, as upstream.
func TestPrepareProcessOOMScoreRefused(t *testing.T) {
	t.Parallel()
	c := Config{Config: options.DefaultConfig()}
	c.Kubelet.MaxOpenFiles = 0
	*c.Kubelet.FailSwapOn = false
	core, logs := observer.New(zap.InfoLevel)
	h := hostFiles{CgroupRoot: t.TempDir(), Swaps: "/proc/swaps", OOMScoreAdj: filepath.Join(t.TempDir(), "missing", "oom_score_adj"), ProcSys: fakeProcSys(t, nil)}
	if err := prepareProcess(&c, h, zap.New(core)); err != nil {
		t.Fatal(err)
	}
	if logs.FilterMessage("Failed to ApplyOOMScoreAdj").Len() != 1 {
		t.Fatalf("logs %v", logs.All())
	}
}
