//go:build !linux

package stats

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// errUnsupported is returned for node figures this platform cannot read.
var errUnsupported = errors.New("node stats are only supported on Linux")

func (h *hostReader) readNodeSample(time.Time) (nodeSample, error) {
	return nodeSample{}, errUnsupported
}

func (h *hostReader) network(time.Time) (*statsapi.NetworkStats, error) {
	return nil, errUnsupported
}

func (h *hostReader) rlimit(now time.Time) *statsapi.RlimitStats {
	return &statsapi.RlimitStats{Time: metav1.NewTime(now)}
}

// BootTime is not known off Linux.
func BootTime(time.Time) (time.Time, error) { return time.Time{}, errUnsupported }

func statFs(string, time.Time) (fsInfo, error) { return fsInfo{}, errUnsupported }

func walkDiskUsage(context.Context, string, time.Time) (diskUsage, error) {
	return diskUsage{}, errUnsupported
}

func fileUsage(string) (diskUsage, error) { return diskUsage{}, errUnsupported }

func (p *Provider) systemContainers(time.Time) []statsapi.ContainerStats { return nil }

func deviceOf(string) (uint64, error) { return 0, errUnsupported }
