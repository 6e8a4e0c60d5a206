//go:build !linux

package dockershim

import (
	"errors"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Stats need Linux cgroups. Elsewhere container stats carry attributes and the writable
// layer only, and the pod sandbox stats RPCs answer Unimplemented (the embedded
// UnimplementedRuntimeServiceServer).

var (
	errCgroupGone      = errors.New("cgroup is gone")
	errStatsNotOnLinux = errors.New("cgroup stats are only available on Linux")
)

type statsCgroup struct{}

type cgroupReader struct{}

func newCgroupReader(string) *cgroupReader { return &cgroupReader{} }

func (*cgroupReader) lookup(int) (statsCgroup, error) { return statsCgroup{}, errStatsNotOnLinux }

func (*cgroupReader) parent(cg statsCgroup) statsCgroup { return cg }

func (*cgroupReader) read(statsCgroup, time.Time) (usageSample, error) {
	return usageSample{}, errStatsNotOnLinux
}

func (*cgroupReader) release(statsCgroup) {}

func (*cgroupReader) pruneFiles(time.Time) {}

func (*cgroupReader) network(int, time.Time) (*runtimeapi.NetworkUsage, error) {
	return nil, errStatsNotOnLinux
}

func fsUsedBytes(string) (uint64, bool) { return 0, false }
