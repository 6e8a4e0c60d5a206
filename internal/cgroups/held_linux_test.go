package cgroups

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/fstest"
)

// TestHeldFiles: samples through the held files equal ReadSample's, see rewritten
// content, and files are closed on Release, Prune and removal.
func TestHeldFiles(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	v1 := Paths{
		CPUAcct: filepath.Join(base, "v1/cpuacct/c"),
		Memory:  filepath.Join(base, "v1/memory/c"),
		Pids:    filepath.Join(base, "v1/pids/c"),
	}
	fstest.WriteTree(t, v1.CPUAcct, map[string]string{"cpuacct.usage": "123456789\n"})
	fstest.WriteTree(t, v1.Memory, map[string]string{
		"memory.usage_in_bytes": "1000000\n",
		"memory.limit_in_bytes": "9223372036854771712\n",
		"memory.stat": "cache 5\nrss 1\ninactive_file 3\npgfault 7\ntotal_cache 50\ntotal_rss 700000\n" +
			"total_inactive_file 200000\ntotal_pgfault 42\ntotal_pgmajfault 2\n",
	})
	fstest.WriteTree(t, v1.Pids, map[string]string{"pids.current": "3\n"})
	v2 := Paths{V2: true, Unified: filepath.Join(base, "v2/c")}
	fstest.WriteTree(t, v2.Unified, map[string]string{
		"cpu.stat": "usage_usec 2500\nuser_usec 2000\n", "memory.current": "500\n", "memory.max": "4096\n",
		"memory.stat": "anon 300\nfile 100\ninactive_file 100\npgfault 9\npgmajfault 1\n", "pids.current": "4\n",
	})
	now := time.Unix(100, 0)
	h := NewHeldFiles()
	for _, p := range []Paths{v1, v2} {
		want, err := ReadSample(p)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // opened, then held
			got, err := h.Sample(p, now)
			if err != nil || got != want {
				t.Fatalf("held files: %+v, %v\nReadSample: %+v", got, err, want)
			}
		}
	}
	if n := h.Held(); n != 10 {
		t.Errorf("%d files held, want 10 (5 per sample)", n)
	}
	fstest.WriteTree(t, v2.Unified, map[string]string{"cpu.stat": "usage_usec 7000\n"})
	if got, err := h.Sample(v2, now); err != nil || got.CPUNanos != 7e6 {
		t.Errorf("after a rewrite: cpu %d, %v; want 7000000", got.CPUNanos, err)
	}
	h.Release(v1.CPUAcct, v1.Memory, v1.Pids)
	if n := h.Held(); n != 5 {
		t.Errorf("after releasing v1: %d files held, want 5", n)
	}
	h.Prune(now.Add(time.Second))
	if n := h.Held(); n != 0 {
		t.Errorf("after pruning: %d files held, want 0", n)
	}
	if err := os.RemoveAll(v2.Unified); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Sample(v2, now); !errors.Is(err, ErrGone) {
		t.Errorf("removed cgroup: err = %v, want ErrGone", err)
	}
	var got string
	if err := h.ReadUnheld(filepath.Join(v1.Pids, "pids.current"), func(b []byte) error { got = string(b); return nil }); err != nil || got != "3\n" {
		t.Errorf("ReadUnheld = %q, %v", got, err)
	}
	if n := h.Held(); n != 0 {
		t.Errorf("ReadUnheld left %d files open", n)
	}
}
