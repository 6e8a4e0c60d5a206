package eviction

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
)

// fsStatsType is a part of a pod's disk usage.
type fsStatsType int

const (
	fsStatsRoot              fsStatsType = iota // containers' writable layers
	fsStatsLogs                                 // containers' logs
	fsStatsLocalVolumeSource                    // hostPath, emptyDir on disk, configMap, gitRepo volumes
)

// podStatsFunc finds a pod's stats.
type podStatsFunc func(*v1.Pod) (statsapi.PodStats, bool)

// rankFunc orders pods for eviction, first = evicted first.
type rankFunc func(pods []*v1.Pod, stats podStatsFunc)

type cmpFunc func(p1, p2 *v1.Pod) int

// orderBy sorts pods by the comparators, each breaking the ties of the one
// before.
func orderBy(pods []*v1.Pod, cmps ...cmpFunc) {
	slices.SortStableFunc(pods, func(a, b *v1.Pod) int {
		for _, c := range cmps {
			if r := c(a, b); r != 0 {
				return r
			}
		}
		return 0
	})
}

// cmpBool puts true before false.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// cmpInt64Desc puts the larger first.
func cmpInt64Desc(a, b int64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// rankMemoryPressure: pods using more memory than they request first, then
// lower priority, then larger usage above the request.
func rankMemoryPressure(pods []*v1.Pod, stats podStatsFunc) {
	orderBy(pods, exceedsRequests(stats, memoryUsage, v1.ResourceMemory), priority, usageAboveRequest(stats, memoryUsage, v1.ResourceMemory))
}

// rankPIDPressure: lower priority first, then more processes.
func rankPIDPressure(pods []*v1.Pod, stats podStatsFunc) {
	orderBy(pods, priority, byStats(stats, func(_ *v1.Pod, s1 statsapi.PodStats, _ *v1.Pod, s2 statsapi.PodStats) int {
		return cmpInt64Desc(processCount(s1), processCount(s2))
	}))
}

// rankDiskPressure ranks by the usage of the given parts of the pods' disk
// usage (bytes or inodes): over request first, then lower priority, then
// larger usage above the ephemeral-storage request (upstream subtracts it for
// inodes too).
func rankDiskPressure(parts []fsStatsType, res v1.ResourceName) rankFunc {
	usage := func(pod *v1.Pod, s statsapi.PodStats) int64 { return podDiskUsage(s, pod, parts)[res] }
	return func(pods []*v1.Pod, stats podStatsFunc) {
		orderBy(pods, exceedsRequests(stats, usage, res), priority, usageAboveRequest(stats, usage, v1.ResourceEphemeralStorage))
	}
}

// usageFunc measures one resource of a pod from its stats.
type usageFunc func(pod *v1.Pod, s statsapi.PodStats) int64

// byStats compares two pods by their stats with cmp; a pod without stats
// comes first (upstream evicts those first).
func byStats(stats podStatsFunc, cmp func(p1 *v1.Pod, s1 statsapi.PodStats, p2 *v1.Pod, s2 statsapi.PodStats) int) cmpFunc {
	return func(p1, p2 *v1.Pod) int {
		s1, ok1 := stats(p1)
		s2, ok2 := stats(p2)
		if !ok1 || !ok2 {
			return cmpBool(!ok1, !ok2)
		}
		return cmp(p1, s1, p2, s2)
	}
}

// exceedsRequests puts pods using more of res than they request first.
func exceedsRequests(stats podStatsFunc, usage usageFunc, res v1.ResourceName) cmpFunc {
	return byStats(stats, func(p1 *v1.Pod, s1 statsapi.PodStats, p2 *v1.Pod, s2 statsapi.PodStats) int {
		return cmpBool(usage(p1, s1) > podRequest(p1, res), usage(p2, s2) > podRequest(p2, res))
	})
}

// usageAboveRequest puts the larger usage above the request of requestOf first.
func usageAboveRequest(stats podStatsFunc, usage usageFunc, requestOf v1.ResourceName) cmpFunc {
	return byStats(stats, func(p1 *v1.Pod, s1 statsapi.PodStats, p2 *v1.Pod, s2 statsapi.PodStats) int {
		return cmpInt64Desc(usage(p1, s1)-podRequest(p1, requestOf), usage(p2, s2)-podRequest(p2, requestOf))
	})
}

// priority puts lower priority first.
func priority(p1, p2 *v1.Pod) int {
	a, b := corev1helpers.PodPriority(p1), corev1helpers.PodPriority(p2)
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// podRequest is the pod's effective request of res (0 for inodes and pids),
// as upstream's GetResourceRequestQuantity: the pod overhead is added only to
// a non-zero request.
func podRequest(pod *v1.Pod, res v1.ResourceName) int64 {
	q, ok := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{ExcludeOverhead: true})[res]
	if !ok || q.IsZero() {
		return 0
	}
	v := q.Value()
	if o, ok := pod.Spec.Overhead[res]; ok {
		v += o.Value()
	}
	return v
}

func memoryUsage(_ *v1.Pod, s statsapi.PodStats) int64 {
	if s.Memory == nil || s.Memory.WorkingSetBytes == nil {
		return 0
	}
	return int64(*s.Memory.WorkingSetBytes)
}

func processCount(s statsapi.PodStats) int64 {
	if s.ProcessStats == nil || s.ProcessStats.ProcessCount == nil {
		return 0
	}
	return int64(*s.ProcessStats.ProcessCount)
}

// podDiskUsage sums the chosen parts of a pod's disk usage, in bytes
// (ephemeral-storage) and inodes.
func podDiskUsage(s statsapi.PodStats, pod *v1.Pod, parts []fsStatsType) map[v1.ResourceName]int64 {
	var bytes, inodes int64
	add := func(fs *statsapi.FsStats) {
		if fs == nil {
			return
		}
		if fs.UsedBytes != nil {
			bytes += int64(*fs.UsedBytes)
		}
		if fs.InodesUsed != nil {
			inodes += int64(*fs.InodesUsed)
		}
	}
	for _, c := range s.Containers {
		if slices.Contains(parts, fsStatsRoot) {
			add(c.Rootfs)
		}
		if slices.Contains(parts, fsStatsLogs) {
			add(c.Logs)
		}
	}
	if slices.Contains(parts, fsStatsLocalVolumeSource) {
		for _, name := range localVolumeNames(pod) {
			for i := range s.VolumeStats {
				if s.VolumeStats[i].Name == name {
					add(&s.VolumeStats[i].FsStats)
					break
				}
			}
		}
	}
	return map[v1.ResourceName]int64{v1.ResourceEphemeralStorage: bytes, resourceInodes: inodes}
}

// localVolumeNames are the pod's volumes on the node's disk: hostPath, and
// the local ephemeral ones (gitRepo, emptyDir on disk, configMap).
func localVolumeNames(pod *v1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil || v.GitRepo != nil || v.ConfigMap != nil ||
			(v.EmptyDir != nil && v.EmptyDir.Medium == v1.StorageMediumDefault) {
			out = append(out, v.Name)
		}
	}
	return out
}

// rankFuncs are the rank functions of each signal for the filesystem layout
// (upstream's buildSignalToRankFunc without the split containerfs, which the
// Docker runtime never reports).
func rankFuncs(dedicatedImageFs bool) map[string]rankFunc {
	all := []fsStatsType{fsStatsRoot, fsStatsLogs, fsStatsLocalVolumeSource}
	nodeFs, imageFs := all, all
	if dedicatedImageFs {
		nodeFs, imageFs = []fsStatsType{fsStatsLogs, fsStatsLocalVolumeSource}, []fsStatsType{fsStatsRoot}
	}
	return map[string]rankFunc{
		resources.SignalMemoryAvailable:            rankMemoryPressure,
		resources.SignalAllocatableMemoryAvailable: rankMemoryPressure,
		resources.SignalPIDAvailable:               rankPIDPressure,
		resources.SignalNodeFsAvailable:            rankDiskPressure(nodeFs, v1.ResourceEphemeralStorage),
		resources.SignalNodeFsInodesFree:           rankDiskPressure(nodeFs, resourceInodes),
		resources.SignalImageFsAvailable:           rankDiskPressure(imageFs, v1.ResourceEphemeralStorage),
		resources.SignalImageFsInodesFree:          rankDiskPressure(imageFs, resourceInodes),
		resources.SignalContainerFsAvailable:       rankDiskPressure(imageFs, v1.ResourceEphemeralStorage),
		resources.SignalContainerFsInodesFree:      rankDiskPressure(imageFs, resourceInodes),
	}
}
