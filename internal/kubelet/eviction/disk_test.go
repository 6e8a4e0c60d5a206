package eviction

import (
	"slices"
	"testing"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// diskNode is a sample with nodefs and imagefs available out of 100Gi.
func diskNode(at time.Time, nodefs, imagefs int64) *statsapi.NodeStats {
	n := memNode(at, 4*gi, 4*gi)
	n.Fs = fsStats(at, nodefs, 100*gi)
	n.Runtime = &statsapi.RuntimeStats{ImageFs: fsStats(at, imagefs, 100*gi)}
	return n
}

func TestManagerDiskPressure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc          string
		dedicated     bool
		hard          map[string]string
		minReclaim    map[string]string
		nodefs        int64 // available before the reclaim
		imagefs       int64
		afterReclaim  int64 // nodefs (and imagefs) available after it; 0 = unchanged
		wantSteps     []string
		wantEvicted   []string
		wantEventRes  string
		wantCondition bool
	}{
		{
			desc: "one filesystem: containers then images free enough", hard: map[string]string{"nodefs.available": "10Gi"},
			nodefs: 5 * gi, imagefs: 5 * gi, afterReclaim: 20 * gi,
			wantSteps: []string{"containers", "images"}, wantEvicted: []string{},
		},
		{
			desc: "one filesystem: not enough freed, a pod goes", hard: map[string]string{"nodefs.available": "10Gi"},
			nodefs: 5 * gi, imagefs: 5 * gi, afterReclaim: 8 * gi,
			wantSteps: []string{"containers", "images"}, wantEvicted: []string{"writer"},
		},
		{
			desc: "one filesystem: freed past the threshold but not its minimum reclaim",
			hard: map[string]string{"nodefs.available": "10Gi"}, minReclaim: map[string]string{"nodefs.available": "5Gi"},
			nodefs: 5 * gi, imagefs: 5 * gi, afterReclaim: 12 * gi,
			wantSteps: []string{"containers", "images"}, wantEvicted: []string{"writer"},
		},
		{
			desc: "one filesystem: freed past the minimum reclaim",
			hard: map[string]string{"nodefs.available": "10Gi"}, minReclaim: map[string]string{"nodefs.available": "5Gi"},
			nodefs: 5 * gi, imagefs: 5 * gi, afterReclaim: 15 * gi,
			wantSteps: []string{"containers", "images"}, wantEvicted: []string{},
		},
		{
			desc: "one filesystem: imagefs pressure reclaims too", hard: map[string]string{"imagefs.available": "10Gi"},
			nodefs: 50 * gi, imagefs: 5 * gi, afterReclaim: 20 * gi,
			wantSteps: []string{"containers", "images"}, wantEvicted: []string{},
		},
		{
			desc: "dedicated imagefs: nodefs pressure reclaims nothing, evicts by logs and volumes", dedicated: true,
			hard: map[string]string{"nodefs.available": "10Gi"}, nodefs: 5 * gi, imagefs: 50 * gi, afterReclaim: 20 * gi,
			wantSteps: []string{}, wantEvicted: []string{"logger"},
		},
		{
			desc: "dedicated imagefs: imagefs pressure reclaims", dedicated: true,
			hard: map[string]string{"imagefs.available": "10Gi"}, nodefs: 50 * gi, imagefs: 5 * gi, afterReclaim: 20 * gi,
			wantSteps: []string{"containers", "images"}, wantEvicted: []string{},
		},
		{
			desc: "dedicated imagefs: imagefs not freed evicts by writable layer", dedicated: true,
			hard: map[string]string{"imagefs.available": "10Gi"}, nodefs: 50 * gi, imagefs: 5 * gi,
			wantSteps: []string{"containers", "images"}, wantEvicted: []string{"writer"},
		},
		{
			desc: "inodes", hard: map[string]string{"nodefs.inodesFree": "950000"},
			nodefs: 50 * gi, imagefs: 50 * gi,
			wantSteps: []string{"containers", "images"}, wantEvicted: []string{"writer"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			writer := newPod("writer")
			logger := newPod("logger", volumes(emptyDir("cache", "", "")))
			th := mustParse(t, ThresholdConfig{Hard: tc.hard, MinimumReclaim: tc.minReclaim})
			e := newEnv(t, Options{Thresholds: th}, tc.dedicated, writer, logger)
			podStats := []statsapi.PodStats{podDisk(writer, 3*gi, 0), podDisk(logger, 0, gi, "cache", gi)}
			e.sample(diskNode(t0, tc.nodefs, tc.imagefs), podStats...)
			e.onReclaim = func(step string) {
				if step == "images" && tc.afterReclaim > 0 {
					e.sample(diskNode(t0, tc.afterReclaim, tc.afterReclaim), podStats...)
				}
			}
			got := e.sync()
			if !slices.Equal(got, tc.wantEvicted) {
				t.Errorf("evicted %q, want %q", got, tc.wantEvicted)
			}
			if steps := e.reclaimSteps(); !slices.Equal(steps, tc.wantSteps) {
				t.Errorf("reclaim steps = %q, want %q", steps, tc.wantSteps)
			}
			if !e.m.IsUnderDiskPressure() || e.m.IsUnderMemoryPressure() {
				t.Error("want DiskPressure only")
			}
			if want := []string{"Warning EvictionThresholdMet Attempting to reclaim ephemeral-storage"}; tc.hard["nodefs.inodesFree"] == "" &&
				!slices.Equal(e.rec.node(), want) {
				t.Errorf("node events = %q, want %q", e.rec.node(), want)
			}
			if _, msg, ok := e.m.Admit(newPod("new", requests("memory", "1Gi"))); ok || msg != "The node had condition: [DiskPressure]. " {
				t.Errorf("Admit under disk pressure = %q, %v", msg, ok)
			}
		})
	}
}

func TestManagerMemoryBeforeDisk(t *testing.T) {
	t.Parallel()
	p := newPod("p")
	th := mustParse(t, ThresholdConfig{Hard: map[string]string{"nodefs.available": "10Gi", "memory.available": "1Gi"}})
	e := newEnv(t, Options{Thresholds: th}, false, p)
	node := diskNode(t0, 5*gi, 5*gi)
	node.Memory = memNode(t0, 500*mi, 7*gi).Memory
	e.sample(node, podMem(p, gi))
	if got := e.sync(); !slices.Equal(got, []string{"p"}) {
		t.Fatalf("evicted %q", got)
	}
	if steps := e.reclaimSteps(); len(steps) != 0 {
		t.Errorf("disk reclaimed (%q) while memory comes first", steps)
	}
	if got := e.evictions(t, "memory.available"); got != 1 {
		t.Errorf("kubelet_evictions{memory.available} = %v, want 1", got)
	}
	if !e.m.IsUnderMemoryPressure() || !e.m.IsUnderDiskPressure() {
		t.Error("want both MemoryPressure and DiskPressure")
	}
}

func TestManagerNoActivePods(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{Thresholds: hardMemory(t, "1Gi")}, false)
	e.memSample(100 * mi)
	if got := e.sync(); len(got) != 0 {
		t.Errorf("evicted %q with no pods", got)
	}
	if !e.m.IsUnderMemoryPressure() {
		t.Error("no MemoryPressure")
	}
}
