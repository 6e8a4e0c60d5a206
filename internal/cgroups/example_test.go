package cgroups_test

import (
	"fmt"
	"strings"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
)

// A container on a hybrid host: the v1 controllers are used, each from its own
// hierarchy, and Parent gives the pod's cgroup. (A cgroups.Host does the
// reading: Host.Process(pid) is these three steps over /proc.)
func Example() {
	mounts, _ := cgroups.ParseMountinfo(strings.NewReader(
		"33 31 0:30 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n" +
			"35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n" +
			"41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"))
	proc, _ := cgroups.ParseProcCgroup(strings.NewReader(
		"4:memory:/kubepods/pod1/abc\n2:cpuacct:/kubepods/pod1/abc\n0::/kubepods/pod1/abc\n"))
	paths, _ := cgroups.Resolve(mounts, proc)
	fmt.Println(mounts.Mode())
	fmt.Println(paths.Memory)
	fmt.Println(paths.Parent().CPUAcct)
	// Output:
	// hybrid
	// /sys/fs/cgroup/memory/kubepods/pod1/abc
	// /sys/fs/cgroup/cpuacct/kubepods/pod1
}
