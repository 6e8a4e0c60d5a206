package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeHost writes a proc tree (self/mountinfo, <pid>/cgroup) under a temp dir,
// with the cgroup hierarchies' mountpoints under it too; "%s" in mountinfo
// stands for that dir.
func fakeHost(t *testing.T, mountinfo string, procs map[string]string) (*Host, string) {
	t.Helper()
	base := t.TempDir()
	files := map[string]string{"proc/self/mountinfo": strings.ReplaceAll(mountinfo, "%s", base)}
	for pid, cg := range procs {
		files["proc/"+pid+"/cgroup"] = cg
	}
	for rel, content := range files {
		p := filepath.Join(base, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return NewHost(filepath.Join(base, "proc")), base
}

const hostMountinfoV1 = "31 23 0:28 / %s/cg rw - tmpfs tmpfs rw\n" +
	"32 31 0:29 / %s/cg/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct\n" +
	"33 31 0:30 /nested %s/cg/memory rw - cgroup cgroup rw,memory\n" +
	"34 31 0:31 / %s/cg/pids rw - cgroup cgroup rw,pids\n" +
	"35 31 0:32 / %s/cg/unified rw - cgroup2 cgroup2 rw\n" +
	"36 31 0:29 / /elsewhere/cpuacct rw - cgroup cgroup rw,cpuacct\n"

// TestHostRoot: the root cgroup is each hierarchy's mountpoint (the first mount
// wins, the mount root does not matter), "" for what is not mounted.
func TestHostRoot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc, mountinfo string
		want            func(base string) RootDirs
	}{
		{
			desc: "hybrid", mountinfo: hostMountinfoV1,
			want: func(b string) RootDirs {
				return RootDirs{CPUAcct: b + "/cg/cpu,cpuacct", Memory: b + "/cg/memory", Unified: b + "/cg/unified"}
			},
		},
		{
			desc:      "v2",
			mountinfo: "30 23 0:26 / %s/cg rw,nosuid - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
			want:      func(b string) RootDirs { return RootDirs{Unified: b + "/cg"} },
		},
		{
			desc:      "nothing mounted, and a short line",
			mountinfo: "23 1 0:21 / / rw - ext4 /dev/vda rw\nbroken line\n",
			want:      func(string) RootDirs { return RootDirs{} },
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			h, base := fakeHost(t, tc.mountinfo, nil)
			got, err := h.Root()
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.want(base); got != want {
				t.Errorf("Root() = %+v, want %+v", got, want)
			}
		})
	}
}

// TestHostProcessAndNamed: a process's cgroup and a named one resolve through the
// mounts (the nested memory root dropped); a process that is gone is ErrGone; a
// host without hierarchies is an error for both.
func TestHostProcessAndNamed(t *testing.T) {
	t.Parallel()
	h, base := fakeHost(t, hostMountinfoV1, map[string]string{
		"42":   "4:pids:/docker/abc\n3:memory:/nested/docker/abc\n2:cpu,cpuacct:/docker/abc\n0::/docker/abc\n",
		"self": "3:memory:/nested/kubelet\n2:cpu,cpuacct:/kubelet\n",
	})
	got, err := h.Process(42)
	if err != nil {
		t.Fatal(err)
	}
	want := Paths{CPUAcct: base + "/cg/cpu,cpuacct/docker/abc", Memory: base + "/cg/memory/docker/abc", Pids: base + "/cg/pids/docker/abc"}
	if got != want {
		t.Errorf("Process(42) = %+v, want %+v", got, want)
	}
	if got, err := h.Process(0); err != nil || got.Memory != base+"/cg/memory/kubelet" {
		t.Errorf("Process(0) = %+v, %v; want the memory cgroup of self", got, err)
	}
	if _, err := h.Process(7); !errors.Is(err, ErrGone) {
		t.Errorf("Process(7) of a gone process: %v, want ErrGone", err)
	}
	got, err = h.Named("/kubepods")
	want = Paths{CPUAcct: base + "/cg/cpu,cpuacct/kubepods", Memory: base + "/cg/memory/kubepods", Pids: base + "/cg/pids/kubepods"}
	if err != nil || got != want {
		t.Errorf("Named(/kubepods) = %+v, %v; want %+v", got, err, want)
	}

	none, _ := fakeHost(t, "23 1 0:21 / / rw - ext4 /dev/vda rw\n", map[string]string{"42": "0::/x\n"})
	if _, err := none.Process(42); err == nil {
		t.Error("Process on a host without cgroups: no error")
	}
	if _, err := none.Named("/x"); err == nil {
		t.Error("Named on a host without cgroups: no error")
	}
}

// TestHostWalk: what /metrics/cadvisor's walk uses. Children are read in the
// pids hierarchy (the fewest files), Exists in the memory one, and Cadvisor
// names each v1 directory; on a v2 host Cadvisor says so and Children read the
// unified hierarchy.
func TestHostWalk(t *testing.T) {
	t.Parallel()
	h, base := fakeHost(t, hostMountinfoV1, nil)
	for _, d := range []string{"cg/pids/kubepods/burstable", "cg/pids/kubepods/podA", "cg/memory/kubepods/podB", "cg/memory/runtime"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(base, "cg/pids/kubepods/pids.max"), []byte("max\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kids, err := h.Children("/kubepods")
	slices.Sort(kids)
	if err != nil || fmt.Sprint(kids) != "[burstable podA]" {
		t.Errorf("Children(/kubepods) = %v, %v; want the pids hierarchy's [burstable podA]", kids, err)
	}
	if _, err := h.Children("/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Children of a missing cgroup: %v, want fs.ErrNotExist", err)
	}
	if !h.Exists("/runtime") || h.Exists("/missing") {
		t.Errorf("Exists(/runtime) = %v, Exists(/missing) = %v; want true, false", h.Exists("/runtime"), h.Exists("/missing"))
	}
	d, ok, err := h.Cadvisor("/kubepods/podA")
	want := CadvisorDirs{CPU: base + "/cg/cpu,cpuacct/kubepods/podA", CPUAcct: base + "/cg/cpu,cpuacct/kubepods/podA", Memory: base + "/cg/memory/kubepods/podA"}
	if err != nil || !ok || d != want {
		t.Errorf("Cadvisor = %+v, %v, %v; want %+v", d, ok, err, want)
	}

	v2, base2 := fakeHost(t, "30 23 0:26 / %s/cg rw - cgroup2 cgroup2 rw\n", nil)
	if err := os.MkdirAll(filepath.Join(base2, "cg/kubepods/podC"), 0o755); err != nil {
		t.Fatal(err)
	}
	if d, ok, err := v2.Cadvisor("/kubepods/podC"); !ok || err != nil || d != (CadvisorDirs{Unified: base2 + "/cg/kubepods/podC"}) {
		t.Errorf("Cadvisor on v2 = %+v, %v, %v; want the cgroup2 directory", d, ok, err)
	}
	if kids, err := v2.Children("/kubepods"); err != nil || fmt.Sprint(kids) != "[podC]" {
		t.Errorf("Children on v2 = %v, %v; want [podC]", kids, err)
	}
}
