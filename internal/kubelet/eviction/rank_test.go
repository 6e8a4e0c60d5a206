package eviction

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func names(pods []*v1.Pod) []string {
	out := []string{}
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestRankMemoryPressure(t *testing.T) {
	t.Parallel()
	under := newPod("under", requests("memory", "1Gi"))                            // 500Mi of 1Gi
	overHigh := newPod("over-high", requests("memory", "100Mi"), priorityOf(1000)) // 200Mi of 100Mi
	bestEffort := newPod("best-effort")                                            // 50Mi of 0
	bigBestEffort := newPod("big-best-effort")                                     // 300Mi of 0
	noStats := newPod("no-stats", requests("memory", "10Gi"), priorityOf(5000))
	underLow := newPod("under-low", requests("memory", "1Gi"), priorityOf(-5)) // 100Mi of 1Gi
	stats := podStatsOf([]statsapi.PodStats{
		podMem(under, 500*mi), podMem(overHigh, 200*mi), podMem(bestEffort, 50*mi),
		podMem(bigBestEffort, 300*mi), podMem(underLow, 100*mi),
	})
	pods := []*v1.Pod{under, overHigh, bestEffort, bigBestEffort, noStats, underLow}
	rankMemoryPressure(pods, stats)
	want := []string{"no-stats", "big-best-effort", "best-effort", "over-high", "under-low", "under"}
	if got := names(pods); !slices.Equal(got, want) {
		t.Errorf("rank = %q, want %q", got, want)
	}
}

func TestRankMemoryPressureUsageAboveRequest(t *testing.T) {
	t.Parallel()
	// All over their requests with one priority: the larger excess goes first,
	// whatever the raw usage.
	a := newPod("a", requests("memory", "1Gi"))  // 1.5Gi: +512Mi
	b := newPod("b", requests("memory", "10Mi")) // 600Mi: +590Mi
	c := newPod("c")                             // 100Mi: +100Mi
	pods := []*v1.Pod{a, c, b}
	rankMemoryPressure(pods, podStatsOf([]statsapi.PodStats{podMem(a, gi+512*mi), podMem(b, 600*mi), podMem(c, 100*mi)}))
	if got, want := names(pods), []string{"b", "a", "c"}; !slices.Equal(got, want) {
		t.Errorf("rank = %q, want %q", got, want)
	}
}

func TestRankPIDPressure(t *testing.T) {
	t.Parallel()
	procs := func(pod *v1.Pod, n int64) statsapi.PodStats {
		return statsapi.PodStats{PodRef: statsapi.PodReference{UID: string(pod.UID)}, ProcessStats: &statsapi.ProcessStats{ProcessCount: u64(n)}}
	}
	few := newPod("few")
	many := newPod("many")
	low := newPod("low", priorityOf(-1))
	noStats := newPod("no-stats")
	high := newPod("high", priorityOf(100))
	pods := []*v1.Pod{high, few, many, noStats, low}
	rankPIDPressure(pods, podStatsOf([]statsapi.PodStats{procs(few, 10), procs(many, 50), procs(low, 1), procs(high, 1000)}))
	want := []string{"low", "no-stats", "many", "few", "high"}
	if got := names(pods); !slices.Equal(got, want) {
		t.Errorf("rank = %q, want %q", got, want)
	}
}

func TestPodDiskUsage(t *testing.T) {
	t.Parallel()
	pod := newPod("p", volumes(
		v1.Volume{Name: "hp", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/x"}}},
		emptyDir("disk", v1.StorageMediumDefault, ""),
		emptyDir("mem", v1.StorageMediumMemory, ""),
		v1.Volume{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
		v1.Volume{Name: "git", VolumeSource: v1.VolumeSource{GitRepo: &v1.GitRepoVolumeSource{}}},
		v1.Volume{Name: "pvc", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{}}},
		v1.Volume{Name: "nostats", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/y"}}},
	))
	// Bytes are distinct powers of two so that the sum names its parts;
	// inodes are bytes/1Ki.
	s := podDisk(pod, 1*mi, 2*mi, "hp", 4*mi, "disk", 8*mi, "mem", 16*mi, "cm", 32*mi, "git", 64*mi, "pvc", 128*mi)
	for _, tc := range []struct {
		desc  string
		parts []fsStatsType
		want  int64
	}{
		{desc: "all: rootfs, logs, hostPath, disk emptyDir, configMap, gitRepo", parts: []fsStatsType{fsStatsRoot, fsStatsLogs, fsStatsLocalVolumeSource},
			want: (1 + 2 + 4 + 8 + 32 + 64) * mi},
		{desc: "dedicated imagefs nodefs: logs and local volumes", parts: []fsStatsType{fsStatsLogs, fsStatsLocalVolumeSource},
			want: (2 + 4 + 8 + 32 + 64) * mi},
		{desc: "dedicated imagefs: rootfs", parts: []fsStatsType{fsStatsRoot}, want: 1 * mi},
		{desc: "volumes only", parts: []fsStatsType{fsStatsLocalVolumeSource}, want: (4 + 8 + 32 + 64) * mi},
		{desc: "nothing", want: 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got := podDiskUsage(s, pod, tc.parts)
			if got[v1.ResourceEphemeralStorage] != tc.want || got[resourceInodes] != tc.want/ki {
				t.Errorf("podDiskUsage = %v, want %d bytes (%d Mi) and %d inodes", got, tc.want, tc.want/mi, tc.want/ki)
			}
		})
	}
}

func TestPodDiskUsageMissingStats(t *testing.T) {
	t.Parallel()
	pod := newPod("p")
	s := statsapi.PodStats{Containers: []statsapi.ContainerStats{{Name: "app"}, {Name: "side", Rootfs: &statsapi.FsStats{}}}}
	got := podDiskUsage(s, pod, []fsStatsType{fsStatsRoot, fsStatsLogs, fsStatsLocalVolumeSource})
	if got[v1.ResourceEphemeralStorage] != 0 || got[resourceInodes] != 0 {
		t.Errorf("podDiskUsage = %v, want zeros", got)
	}
}

func TestRankDiskPressure(t *testing.T) {
	t.Parallel()
	// writer uses its writable layer, logger its logs and an emptyDir,
	// requested has the most but asks for more ephemeral storage.
	writer := newPod("writer")
	logger := newPod("logger", volumes(emptyDir("cache", "", ""), emptyDir("tmpfs", v1.StorageMediumMemory, "")))
	requested := newPod("requested", requests("ephemeral-storage", "20Gi"))
	noStats := newPod("no-stats", priorityOf(100))
	stats := podStatsOf([]statsapi.PodStats{
		podDisk(writer, 5*gi, 0),
		podDisk(logger, 0, 1*gi, "cache", 1*gi, "tmpfs", 10*gi),
		podDisk(requested, 8*gi, 1*gi),
	})
	for _, tc := range []struct {
		desc      string
		dedicated bool
		signal    string
		want      []string
	}{
		{desc: "one filesystem: nodefs counts everything", signal: "nodefs.available",
			want: []string{"no-stats", "writer", "logger", "requested"}},
		{desc: "one filesystem: imagefs counts everything", signal: "imagefs.available",
			want: []string{"no-stats", "writer", "logger", "requested"}},
		// As upstream, the ephemeral-storage request (bytes) is taken off the
		// inodes too, which puts requested last.
		{desc: "one filesystem: inodes", signal: "nodefs.inodesFree",
			want: []string{"no-stats", "writer", "logger", "requested"}},
		// writer uses nothing on nodefs; requested is under its request.
		{desc: "dedicated imagefs: nodefs counts logs and volumes", dedicated: true, signal: "nodefs.available",
			want: []string{"no-stats", "logger", "writer", "requested"}},
		// logger uses nothing on imagefs (0 above its request of 0).
		{desc: "dedicated imagefs: imagefs counts writable layers", dedicated: true, signal: "imagefs.available",
			want: []string{"no-stats", "writer", "logger", "requested"}},
		{desc: "dedicated imagefs: containerfs is imagefs", dedicated: true, signal: "containerfs.available",
			want: []string{"no-stats", "writer", "logger", "requested"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pods := []*v1.Pod{requested, logger, writer, noStats}
			rankFuncs(tc.dedicated)[tc.signal](pods, stats)
			if got := names(pods); !slices.Equal(got, tc.want) {
				t.Errorf("rank = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRankDiskPressurePriority(t *testing.T) {
	t.Parallel()
	big := newPod("big", priorityOf(10))
	small := newPod("small", priorityOf(0))
	pods := []*v1.Pod{big, small}
	rankFuncs(false)["nodefs.available"](pods, podStatsOf([]statsapi.PodStats{podDisk(big, 10*gi, 0), podDisk(small, mi, 0)}))
	if got, want := names(pods), []string{"small", "big"}; !slices.Equal(got, want) {
		t.Errorf("rank = %q, want %q", got, want)
	}
}

func TestRankFuncsCoverEverySignal(t *testing.T) {
	t.Parallel()
	for _, dedicated := range []bool{false, true} {
		funcs := rankFuncs(dedicated)
		for signal := range signalResource {
			if funcs[signal] == nil {
				t.Errorf("rankFuncs(%v) has no rank function for %s", dedicated, signal)
			}
		}
	}
}

func TestLocalVolumeNames(t *testing.T) {
	t.Parallel()
	pod := newPod("p", volumes(
		emptyDir("disk", "", ""), emptyDir("mem", v1.StorageMediumMemory, ""), emptyDir("huge", v1.StorageMediumHugePages, ""),
		v1.Volume{Name: "secret", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{}}},
		v1.Volume{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
		v1.Volume{Name: "hp", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{}}},
	))
	if got, want := localVolumeNames(pod), []string{"disk", "cm", "hp"}; !slices.Equal(got, want) {
		t.Errorf("localVolumeNames = %q, want %q", got, want)
	}
}

// BUG: podRequest (rank.go:134) takes resourcehelper.PodRequests with the
// default options, which add the pod's overhead (RuntimeClass) to every
// request, even when the pod requests nothing. Upstream's
// GetResourceRequestQuantity (pkg/api/v1/resource/helpers.go) excludes the
// overhead and adds it back only when the pod's request is non-zero, so a
// BestEffort pod with a memory overhead has a request of 0 and counts as
// exceeding its request as soon as it uses any memory. Here the overhead hides
// the BestEffort pod behind a pod within its request.
func TestRankMemoryPressureOverheadOfBestEffortPod(t *testing.T) {
	t.Parallel()
	withOverhead := newPod("best-effort-with-overhead", func(p *v1.Pod) { p.Spec.Overhead = list("memory", "100Mi") })
	withinRequest := newPod("within-request", requests("memory", "1Gi"), priorityOf(-10))
	if got := podRequest(withOverhead, v1.ResourceMemory); got != 0 {
		t.Errorf("podRequest(BestEffort pod with overhead) = %d, want 0 as upstream", got)
	}
	pods := []*v1.Pod{withinRequest, withOverhead}
	rankMemoryPressure(pods, podStatsOf([]statsapi.PodStats{podMem(withOverhead, 50*mi), podMem(withinRequest, 500*mi)}))
	if got, want := names(pods), []string{"best-effort-with-overhead", "within-request"}; !slices.Equal(got, want) {
		t.Errorf("rank = %q, want %q (the BestEffort pod exceeds its request of 0)", got, want)
	}
}

func TestPodRequestOverheadWithRequests(t *testing.T) {
	t.Parallel()
	// With a non-zero request the overhead counts, upstream and here.
	p := newPod("p", requests("memory", "1Gi"), func(p *v1.Pod) { p.Spec.Overhead = list("memory", "100Mi") })
	if got := podRequest(p, v1.ResourceMemory); got != gi+100*mi {
		t.Errorf("podRequest = %d, want 1Gi+100Mi", got)
	}
	if got := podRequest(p, resourceInodes); got != 0 {
		t.Errorf("podRequest(inodes) = %d, want 0", got)
	}
}

func TestComparators(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		got  int
		want int
	}{
		{"true before false", cmpBool(true, false), -1},
		{"false after true", cmpBool(false, true), 1},
		{"equal bools", cmpBool(false, false), 0},
		{"larger first", cmpInt64Desc(2, 1), -1},
		{"smaller after", cmpInt64Desc(1, 2), 1},
		{"equal ints", cmpInt64Desc(7, 7), 0},
		{"lower priority first", priority(newPod("a", priorityOf(-1)), newPod("b")), -1},
		{"higher priority after", priority(newPod("a", priorityOf(1)), newPod("b")), 1},
		{"no priority is 0", priority(newPod("a", priorityOf(0)), newPod("b")), 0},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.desc, tc.got, tc.want)
		}
	}
}

func TestRankMemoryPressureAscendingInput(t *testing.T) {
	t.Parallel()
	var pods []*v1.Pod
	var stats []statsapi.PodStats
	for i := range 6 {
		p := newPod(string(rune('a' + i)))
		pods = append(pods, p)
		stats = append(stats, podMem(p, int64(i+1)*100*mi))
	}
	rankMemoryPressure(pods, podStatsOf(stats))
	if got, want := names(pods), []string{"f", "e", "d", "c", "b", "a"}; !slices.Equal(got, want) {
		t.Errorf("rank = %q, want %q", got, want)
	}
}
