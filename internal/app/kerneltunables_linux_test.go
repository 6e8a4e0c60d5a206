package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/kubelet-dockershim/kubelet/internal/app/options"
)

// fakeProcSys makes a /proc/sys with the kernel tunables at this test
// machine's values (Debian's defaults), overridden by values; "" removes one.
func fakeProcSys(t *testing.T, values map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	host := map[string]string{"vm/overcommit_memory": "0", "vm/panic_on_oom": "0", "kernel/panic": "0",
		"kernel/panic_on_oops": "0", "kernel/keys/root_maxkeys": "1000000", "kernel/keys/root_maxbytes": "25000000"}
	for k, v := range values {
		host[k] = v
	}
	for name, v := range host {
		if v == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func readTunable(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// protectKernelDefaults false (the default) sets the tunables, as upstream;
// true refuses to start on the first difference with upstream's message.
func TestSetupKernelTunables(t *testing.T) {
	t.Parallel()
	dir := fakeProcSys(t, nil)
	if err := setupKernelTunables(dir, false, false, true, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"vm/overcommit_memory": "1", "vm/panic_on_oom": "0", "kernel/panic": "10",
		"kernel/panic_on_oops": "1", "kernel/keys/root_maxkeys": "1000000", "kernel/keys/root_maxbytes": "25000000"} {
		if got := readTunable(t, dir, name); got != want {
			t.Errorf("%s = %s after setup, want %s", name, got, want)
		}
	}
	if err := setupKernelTunables(dir, true, false, true, zap.NewNop()); err != nil {
		t.Errorf("protected, all as wanted: %v", err)
	}

	one := fakeProcSys(t, map[string]string{"vm/overcommit_memory": "1", "kernel/panic": "10", "kernel/panic_on_oops": "1", "vm/panic_on_oom": "1"})
	err := setupKernelTunables(one, true, false, true, zap.NewNop())
	if err == nil || err.Error() != "invalid kernel flag: vm/panic_on_oom, expected value: 0, actual value: 1" {
		t.Errorf("one wrong, protected: %v", err)
	}
	if got := readTunable(t, one, "vm/panic_on_oom"); got != "1" {
		t.Errorf("a protected tunable was changed to %s", got)
	}
	two := fakeProcSys(t, map[string]string{"kernel/panic": "10", "kernel/panic_on_oops": "1", "vm/panic_on_oom": "1"})
	err = setupKernelTunables(two, true, false, true, zap.NewNop())
	if err == nil || err.Error() != "[invalid kernel flag: vm/overcommit_memory, expected value: 1, actual value: 0, "+
		"invalid kernel flag: vm/panic_on_oom, expected value: 0, actual value: 1]" {
		t.Errorf("two wrong, protected: %v", err)
	}
	missing := fakeProcSys(t, map[string]string{"kernel/keys/root_maxbytes": ""})
	if err := setupKernelTunables(missing, false, false, true, zap.NewNop()); err == nil || !strings.Contains(err.Error(), "root_maxbytes") {
		t.Errorf("a missing tunable: %v", err)
	}
}

// A kubelet that cannot have its tunables does not start, with upstream's
// words.
func TestPrepareProcessKernelTunables(t *testing.T) {
	t.Parallel()
	c := Config{Config: options.DefaultConfig()}
	c.Kubelet.MaxOpenFiles = 0
	c.Kubelet.ProtectKernelDefaults = true
	h := hostFiles{CgroupRoot: t.TempDir(), Swaps: "/proc/swaps", OOMScoreAdj: filepath.Join(t.TempDir(), "oom"),
		ProcSys: fakeProcSys(t, map[string]string{"vm/overcommit_memory": "1", "kernel/panic": "10", "kernel/panic_on_oops": "0"})}
	*c.Kubelet.FailSwapOn = false
	err := prepareProcess(&c, h, zap.NewNop())
	if err == nil || err.Error() != "failed to start ContainerManager: invalid kernel flag: kernel/panic_on_oops, expected value: 1, actual value: 0" {
		t.Errorf("prepareProcess = %v", err)
	}
}

// In a user namespace a tunable that cannot be set is logged, not fatal,
// while the gate KubeletInUserNamespace is on (its default), as upstream;
// elsewhere, or with the gate off, it stops the kubelet.
func TestKernelTunablesInUserNamespace(t *testing.T) {
	t.Parallel()
	dir := fakeProcSys(t, nil)
	// kernel/panic made unwritable even for root: a link to a read-only
	// sysctl (mode 0444; its value 65536 is not the wanted 10).
	p := filepath.Join(dir, "kernel/panic")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/sys/kernel/ngroups_max", p); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		inUserNS, gate, wantErr bool
	}{{true, true, false}, {true, false, true}, {false, true, true}} {
		err := setupKernelTunables(dir, false, tc.inUserNS, tc.gate, zap.NewNop())
		if (err != nil) != tc.wantErr || err != nil && !strings.Contains(err.Error(), "kernel/panic") {
			t.Errorf("in a user namespace %v, gate %v: %v (want an error: %v)", tc.inUserNS, tc.gate, err, tc.wantErr)
		}
	}
}

func TestRunningInUserNS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for body, want := range map[string]bool{
		"         0          0 4294967295\n": false,
		"         0     100000      65536\n": true,
	} {
		p := filepath.Join(dir, "uid_map")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := runningInUserNS(p); got != want {
			t.Errorf("uid_map %q: in a user namespace = %v, want %v", body, got, want)
		}
	}
}
