//go:build linux

package cgroups

import (
	"errors"
	"strings"
	"testing"
)

func TestMemoryThresholdCgroupDir(t *testing.T) {
	t.Parallel()
	const v1 = "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
	const hybrid = v1 + "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
	const v2 = "24 1 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n"
	for _, tc := range []struct {
		desc      string
		mountinfo string
		path      string
		want      string
		wantErr   error
	}{
		{desc: "v1 root as empty path", mountinfo: v1, path: "", want: "/sys/fs/cgroup/memory"},
		{desc: "v1 root as slash", mountinfo: v1, path: "/", want: "/sys/fs/cgroup/memory"},
		{desc: "v1 child", mountinfo: v1, path: "/kubepods", want: "/sys/fs/cgroup/memory/kubepods"},
		{desc: "relative child", mountinfo: v1, path: "kubepods/burstable", want: "/sys/fs/cgroup/memory/kubepods/burstable"},
		{desc: "dot-dot stays in the mount", mountinfo: v1, path: "/../../etc", want: "/sys/fs/cgroup/memory/etc"},
		{desc: "hybrid uses the v1 memory mount", mountinfo: hybrid, path: "/kubepods", want: "/sys/fs/cgroup/memory/kubepods"},
		{desc: "v2 is unsupported", mountinfo: v2, path: "/kubepods", wantErr: ErrMemcgNotificationUnsupported},
		{desc: "no cgroups is unsupported", mountinfo: "", path: "/", wantErr: ErrMemcgNotificationUnsupported},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got, err := memoryCgroupDir(strings.NewReader(tc.mountinfo), tc.path)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("memoryCgroupDir(%q) error = %v, want %v", tc.path, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("memoryCgroupDir(%q) = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
}

func TestMemoryThresholdNegative(t *testing.T) {
	t.Parallel()
	if n, err := ArmMemoryThreshold("/", -1); err == nil {
		n.Close()
		t.Fatal("ArmMemoryThreshold(-1) succeeded, want an error")
	}
}
