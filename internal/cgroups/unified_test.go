package cgroups

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestSetUnified(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{"memory.min", "memory.low", "memory.high", "memory.oom.group", "memory.swap.max"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("7\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := SetUnified(dir, map[string]string{"memory.high": "63750144", "memory.min": "0", "memory.low": "max", "memory.oom.group": "1", "memory.swap.max": "0"}); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{"memory.high": "63750144", "memory.min": "0", "memory.low": "max", "memory.oom.group": "1", "memory.swap.max": "0"} {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) != want {
			t.Errorf("%s = %q, want %q", f, b, want)
		}
	}
	for _, bad := range []map[string]string{
		{"memory.max": "1"}, {"../memory.high": "1"}, {"memory.high": "-1"}, {"memory.high": "1 2"}, {"memory.high": ""},
		{"memory.oom.group": "max"}, {"memory.oom.group": "2"}, {"memory.oom.group": ""}, {"memory.oom.group": "1\n"},
	} {
		if err := SetUnified(dir, bad); err == nil {
			t.Errorf("SetUnified(%v) accepted", bad)
		}
	}
	if err := SetUnified(filepath.Join(dir, "gone"), map[string]string{"memory.high": "max"}); !errors.Is(err, ErrGone) {
		t.Errorf("SetUnified on a removed cgroup = %v, want ErrGone", err)
	}
}

// SwapAccounting on this machine (cgroup v1, Debian's kernel accounts swap)
// finds the memory root's memory.memsw.limit_in_bytes; a root that is no
// cgroup mount has none.
func TestSwapAccounting(t *testing.T) {
	t.Parallel()
	if !SwapAccounting(DefaultRoot) {
		t.Errorf("SwapAccounting(%s) = false; this machine's memory root has memory.memsw.limit_in_bytes", DefaultRoot)
	}
	if SwapAccounting(t.TempDir()) {
		t.Error("SwapAccounting of an empty directory = true")
	}
}
