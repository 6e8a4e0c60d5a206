package cgroups

import (
	"reflect"
	"strings"
	"testing"
)

// testMountinfoHybrid is a hybrid host (v1 controllers, cgroup2 at unified) whose
// memory hierarchy is mounted from a nested root, and a second cpuacct mount.
const testMountinfoHybrid = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpuacct
35 31 0:32 /nested /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
42 31 0:30 / /elsewhere/cpuacct rw - cgroup cgroup rw,cpuacct
`

// testMountinfoV2 is a v2 host with optional fields and an escaped non-cgroup mount.
const testMountinfoV2 = `24 1 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
25 1 0:23 / /my\040dir rw - ext4 /dev/sda1 rw
`

const testProcHybrid = `9:name=systemd:/docker/abc
8:pids:/docker/abc
4:memory:/nested/docker/abc
2:cpuacct:/docker/abc
1:cpu:/docker/abc
0::/docker/abc
`

func mustMounts(t *testing.T, mountinfo string) Mounts {
	t.Helper()
	m, err := ParseMountinfo(strings.NewReader(mountinfo))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustProc(t *testing.T, cgroup string) ProcCgroup {
	t.Helper()
	p, err := ParseProcCgroup(strings.NewReader(cgroup))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseMountinfo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc     string
		in       string
		wantV1   map[string]Mount
		wantV2   *Mount
		wantMode Mode
	}{
		{
			desc: "hybrid with a nested memory root; the first mount wins",
			in:   testMountinfoHybrid,
			wantV1: map[string]Mount{
				"cpu":          {Root: "/", Mountpoint: "/sys/fs/cgroup/cpu"},
				"cpuacct":      {Root: "/", Mountpoint: "/sys/fs/cgroup/cpuacct"},
				"memory":       {Root: "/nested", Mountpoint: "/sys/fs/cgroup/memory"},
				"pids":         {Root: "/", Mountpoint: "/sys/fs/cgroup/pids"},
				"name=systemd": {Root: "/", Mountpoint: "/sys/fs/cgroup/systemd"},
			},
			wantV2:   &Mount{Root: "/", Mountpoint: "/sys/fs/cgroup/unified"},
			wantMode: ModeHybrid,
		},
		{
			desc: "v1 with combined controllers and an escaped mountpoint",
			in: "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n" +
				"33 31 0:30 / /sys/fs/cgroup/my\\040memory rw - cgroup cgroup ro,memory\n",
			wantV1: map[string]Mount{
				"cpu":     {Root: "/", Mountpoint: "/sys/fs/cgroup/cpu,cpuacct"},
				"cpuacct": {Root: "/", Mountpoint: "/sys/fs/cgroup/cpu,cpuacct"},
				"memory":  {Root: "/", Mountpoint: "/sys/fs/cgroup/my memory"},
			},
			wantMode: ModeV1,
		},
		{
			desc:     "v2 only, with optional fields",
			in:       testMountinfoV2,
			wantV1:   map[string]Mount{},
			wantV2:   &Mount{Root: "/", Mountpoint: "/sys/fs/cgroup"},
			wantMode: ModeV2,
		},
		{
			desc: "v2 with a named v1 hierarchy is still v2",
			in: testMountinfoV2 +
				"40 31 0:37 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n",
			wantV1:   map[string]Mount{"name=systemd": {Root: "/", Mountpoint: "/sys/fs/cgroup/systemd"}},
			wantV2:   &Mount{Root: "/", Mountpoint: "/sys/fs/cgroup"},
			wantMode: ModeV2,
		},
		{
			desc:     "no cgroup mount, a short line",
			in:       "25 1 0:23 / / rw - ext4 /dev/sda1 rw\nbroken line\n",
			wantV1:   map[string]Mount{},
			wantMode: ModeNone,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got := mustMounts(t, tc.in)
			if !reflect.DeepEqual(got.V1, tc.wantV1) {
				t.Errorf("V1 = %v, want %v", got.V1, tc.wantV1)
			}
			if !reflect.DeepEqual(got.V2, tc.wantV2) {
				t.Errorf("V2 = %v, want %v", got.V2, tc.wantV2)
			}
			if m := got.Mode(); m != tc.wantMode {
				t.Errorf("Mode = %v, want %v", m, tc.wantMode)
			}
		})
	}
}

func TestModeString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		mode Mode
		want string
	}{
		{"none", ModeNone, "none"},
		{"v1", ModeV1, "v1"},
		{"hybrid", ModeHybrid, "hybrid"},
		{"v2", ModeV2, "v2"},
		{"unknown", Mode(9), "Mode(9)"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := tc.mode.String(); got != tc.want {
				t.Errorf("String = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseProcCgroup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc    string
		in      string
		want    ProcCgroup
		wantErr bool
	}{
		{
			desc: "hybrid: v1 controllers and the unified line",
			in:   "4:memory:/m\n2:cpu,cpuacct:/c\n0::/u\n",
			want: ProcCgroup{V1: map[string]string{"memory": "/m", "cpu": "/c", "cpuacct": "/c"}, V2: "/u", HasV2: true},
		},
		{
			desc: "v2 root",
			in:   "0::/\n",
			want: ProcCgroup{V1: map[string]string{}, V2: "/", HasV2: true},
		},
		{desc: "nothing usable", in: "garbage\n", wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got, err := ParseProcCgroup(strings.NewReader(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if !tc.wantErr && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	hybrid, v2 := mustMounts(t, testMountinfoHybrid), mustMounts(t, testMountinfoV2)
	procHybrid := mustProc(t, testProcHybrid)
	procV2 := mustProc(t, "0::/system.slice/docker-abc.scope\n")
	for _, tc := range []struct {
		desc    string
		mounts  Mounts
		proc    ProcCgroup
		want    Paths
		wantErr bool
	}{
		{
			desc:   "v1 controllers win on hybrid hosts; the mount root is stripped",
			mounts: hybrid, proc: procHybrid,
			want: Paths{CPUAcct: "/sys/fs/cgroup/cpuacct/docker/abc", Memory: "/sys/fs/cgroup/memory/docker/abc", Pids: "/sys/fs/cgroup/pids/docker/abc"},
		},
		{
			desc: "v2 unified", mounts: v2, proc: procV2,
			want: Paths{V2: true, Unified: "/sys/fs/cgroup/system.slice/docker-abc.scope"},
		},
		{
			desc: "v1 memory only: no cpuacct or pids directory", mounts: hybrid, proc: mustProc(t, "4:memory:/nested/x\n"),
			want: Paths{Memory: "/sys/fs/cgroup/memory/x"},
		},
		{desc: "v1 host, process without memory cgroup", mounts: hybrid, proc: procV2, wantErr: true},
		{desc: "v2 host, process without a unified line", mounts: v2, proc: mustProc(t, "4:memory:/x\n"), wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got, err := Resolve(tc.mounts, tc.proc)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestPathsParent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		in   Paths
		want Paths
	}{
		{
			desc: "v2",
			in:   Paths{V2: true, Unified: "/sys/fs/cgroup/kubepods/pod1/abc"},
			want: Paths{V2: true, Unified: "/sys/fs/cgroup/kubepods/pod1"},
		},
		{
			desc: "v1 keeps missing controllers empty",
			in:   Paths{Memory: "/m/pod1/abc", CPUAcct: "/c/pod1/abc"},
			want: Paths{Memory: "/m/pod1", CPUAcct: "/c/pod1"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := tc.in.Parent(); got != tc.want {
				t.Errorf("Parent = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestMountPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc   string
		mount  Mount
		cgroup string
		want   string
	}{
		{"host root", Mount{Root: "/", Mountpoint: "/sys/fs/cgroup"}, "/a/b", "/sys/fs/cgroup/a/b"},
		{"nested root stripped", Mount{Root: "/nested", Mountpoint: "/mnt"}, "/nested/a", "/mnt/a"},
		{"the root itself", Mount{Root: "/nested", Mountpoint: "/mnt"}, "/nested", "/mnt"},
		{"path outside the root kept", Mount{Root: "/nested", Mountpoint: "/mnt"}, "/other/a", "/mnt/other/a"},
		{"a sibling sharing the root's prefix is not below it", Mount{Root: "/nested", Mountpoint: "/mnt"}, "/nested2/a", "/mnt/nested2/a"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := tc.mount.Path(tc.cgroup); got != tc.want {
				t.Errorf("Path = %q, want %q", got, tc.want)
			}
		})
	}
}
