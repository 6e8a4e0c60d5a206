package stats

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

func TestDuCache(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "a"), make([]byte, 4096))
	c := newDuCache(0)
	ctx := context.Background()
	now := time.Now()
	first, fs, err := c.get(ctx, dir, now)
	if err != nil || first.inodes != 2 || fs.capacity == 0 {
		t.Fatalf("first = %+v fs %+v, %v", first, fs, err)
	}
	mustWrite(t, filepath.Join(dir, "b"), make([]byte, 4096))
	if again, _, _ := c.get(ctx, dir, now.Add(volumeStatsTTL-time.Second)); again != first {
		t.Errorf("within the TTL = %+v, want the cached %+v", again, first)
	}
	later, _, _ := c.get(ctx, dir, now.Add(volumeStatsTTL))
	if later.inodes != 3 || later.bytes <= first.bytes {
		t.Errorf("after the TTL = %+v, want b counted", later)
	}
	if _, _, err := c.get(ctx, filepath.Join(dir, "missing"), now); err == nil {
		t.Error("a missing directory measured")
	}
	c.prune(now.Add(volumeStatsTTL + duEntryIdle + time.Second))
	if len(c.entries) != 0 {
		t.Errorf("prune left %d entries", len(c.entries))
	}
}

func TestVolumeStats(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	ctx := context.Background()
	for _, tc := range []struct {
		desc    string
		uid     string
		desired *v1.Pod
		want    []string
	}{
		{desc: "a desired pod: the volumes of its spec", uid: "u1", desired: ptr.To(webPod()), want: []string{"cache", "token"}},
		{desc: "a pod no longer desired: every ephemeral volume directory", uid: "u1", want: []string{"cache", "notinspec", "token"}},
		{desc: "no volumes directory", uid: "u9"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var got []string
			for _, v := range e.p.volumeStats(ctx, tc.uid, tc.desired) {
				got = append(got, v.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("volumes = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestEphemeralStorage(t *testing.T) {
	t.Parallel()
	rootFs := fsInfo{at: t0, capacity: 1000, available: 400, inodes: 50, inodesFree: 20}
	fsAt := func(at time.Time, used, inodes uint64) *statsapi.FsStats {
		return &statsapi.FsStats{Time: metav1.NewTime(at), UsedBytes: &used, InodesUsed: &inodes}
	}
	for _, tc := range []struct {
		desc                 string
		containers           []statsapi.ContainerStats
		volumes              []statsapi.VolumeStats
		podLogs, etcHosts    *statsapi.FsStats
		wantUsed, wantInodes *uint64
		wantTime             time.Time
	}{
		{desc: "nothing used: the filesystem only", wantTime: t0},
		{
			desc: "layers, logs, volumes, pod logs and etc-hosts add up; the newest time wins",
			containers: []statsapi.ContainerStats{
				{Rootfs: fsAt(t0, 10, 1), Logs: fsAt(t1, 20, 2)},
				{Rootfs: fsAt(t0, 30, 3)},
				{Logs: fsAt(t1.Add(time.Hour), 1000, 1000)}, // logs without a rootfs are not counted (upstream)
			},
			volumes:  []statsapi.VolumeStats{{Name: "v", FsStats: *fsAt(t0, 40, 4)}},
			podLogs:  fsAt(t0, 50, 5),
			etcHosts: fsAt(t0, 60, 6),
			wantUsed: ptr.To[uint64](210), wantInodes: ptr.To[uint64](21), wantTime: t1,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got := ephemeralStorage(tc.containers, tc.volumes, rootFs, tc.podLogs, tc.etcHosts)
			if !ptr.Equal(got.UsedBytes, tc.wantUsed) || !ptr.Equal(got.InodesUsed, tc.wantInodes) || !got.Time.Time.Equal(tc.wantTime) {
				t.Errorf("used %v inodes %v time %v, want %v %v %v", ptr.Deref(got.UsedBytes, 0), ptr.Deref(got.InodesUsed, 0), got.Time,
					ptr.Deref(tc.wantUsed, 0), ptr.Deref(tc.wantInodes, 0), tc.wantTime)
			}
			if *got.CapacityBytes != 1000 || *got.AvailableBytes != 400 || *got.Inodes != 50 || *got.InodesFree != 20 {
				t.Errorf("filesystem figures = %+v", got)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	for _, tc := range []struct {
		desc string
		opts Options
	}{
		{desc: "no runtime", opts: Options{Images: e.img, NodeName: "n", RootDir: "/var/lib/kubelet"}},
		{desc: "no images", opts: Options{Runtime: e.rt, NodeName: "n", RootDir: "/var/lib/kubelet"}},
		{desc: "no node name", opts: Options{Runtime: e.rt, Images: e.img, RootDir: "/var/lib/kubelet"}},
		{desc: "relative root dir", opts: Options{Runtime: e.rt, Images: e.img, NodeName: "n", RootDir: "kubelet"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if _, err := New(tc.opts); err == nil {
				t.Error("New accepted the options")
			}
		})
	}
	p, err := New(Options{Runtime: e.rt, Images: e.img, NodeName: "n", RootDir: "/var/lib/kubelet/"})
	if err != nil || p.podLogsDir != defaultPodLogsDir || p.rootDir != "/var/lib/kubelet" {
		t.Errorf("defaults: %v %q %q", err, p.podLogsDir, p.rootDir)
	}
}

// volumeStatsAggPeriod sets how long a measure is reused.
func TestDuCacheTTL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "a"), make([]byte, 4096))
	c := newDuCache(5 * time.Second)
	ctx := context.Background()
	now := time.Now()
	first, _, err := c.get(ctx, dir, now)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, "b"), make([]byte, 4096))
	if again, _, _ := c.get(ctx, dir, now.Add(4*time.Second)); again != first {
		t.Errorf("within 5s = %+v, want the cached %+v", again, first)
	}
	if later, _, _ := c.get(ctx, dir, now.Add(5*time.Second)); later.bytes <= first.bytes {
		t.Errorf("after 5s = %+v, want b counted", later)
	}
}
