package dockershim

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/checkpoint"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// statsFakeDocker serves containers and images from memory. Methods the tests do not
// need are left to the nil embedded interface (calling them panics).
type statsFakeDocker struct {
	dockerClient

	mu         sync.Mutex
	containers map[string]libdocker.ContainerJSON
	images     []libdocker.ImageSummary
	sizeCalls  int
	imageCalls int
	listCalls  int
	release    chan struct{} // when set, InspectContainerWithSize waits for it
}

func (f *statsFakeDocker) Info(context.Context) (libdocker.Info, error) {
	return libdocker.Info{DockerRootDir: "/var/lib/docker", Driver: "overlay2"}, nil
}

func (f *statsFakeDocker) InspectContainer(_ context.Context, id string) (libdocker.ContainerJSON, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.containers[id]
	if !ok {
		return j, fmt.Errorf("fake: %w", libdocker.ErrNotFound)
	}
	return j, nil
}

func (f *statsFakeDocker) InspectContainerWithSize(ctx context.Context, id string) (libdocker.ContainerJSON, error) {
	f.mu.Lock()
	f.sizeCalls++
	release := f.release
	f.mu.Unlock()
	if release != nil {
		select {
		case <-release:
		case <-ctx.Done():
			return libdocker.ContainerJSON{}, ctx.Err()
		}
	}
	return f.InspectContainer(ctx, id)
}

func (f *statsFakeDocker) ListContainers(_ context.Context, opts libdocker.ListOptions) ([]libdocker.ContainerSummary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listCalls++
	var out []libdocker.ContainerSummary
	for _, j := range f.containers {
		match := true
		for _, l := range opts.Filters.Get("label") {
			k, v, hasValue := strings.Cut(l, "=") // "key" alone: the label is set (Docker's semantics)
			if got, ok := j.Config.Labels[k]; !ok || (hasValue && got != v) {
				match = false
			}
		}
		if !match {
			continue
		}
		state := "exited"
		if j.State.Running {
			state = "running"
		}
		out = append(out, libdocker.ContainerSummary{ID: j.ID, Names: []string{j.Name}, Labels: j.Config.Labels, State: state})
	}
	return out, nil
}

func (f *statsFakeDocker) ListImages(context.Context, bool) ([]libdocker.ImageSummary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.images, nil
}

func (f *statsFakeDocker) InspectImage(_ context.Context, ref string) (libdocker.ImageInspect, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.imageCalls++
	for _, img := range f.images {
		if img.ID == ref {
			return libdocker.ImageInspect{ID: img.ID, RepoTags: img.RepoTags, Size: img.Size}, nil
		}
	}
	return libdocker.ImageInspect{}, fmt.Errorf("fake: %w", libdocker.ErrNotFound)
}

// statsFakeContainer builds an inspect result.
func statsFakeContainer(id, typ, sandboxID string, pid int, size int64, cgroupParent string, labels map[string]string) libdocker.ContainerJSON {
	l := map[string]string{labelType: typ, labelManaged: "true"}
	if sandboxID != "" {
		l[labelSandboxID] = sandboxID
	}
	for k, v := range labels {
		l[k] = v
	}
	raw, err := json.Marshal(map[string]any{
		"Id": id, "Name": "/k8s_" + id + "_pod_ns_uid_0",
		"State":      map[string]any{"Running": pid > 0, "Pid": pid},
		"HostConfig": map[string]any{"CgroupParent": cgroupParent},
		"SizeRw":     size,
		"Config":     map[string]any{"Labels": l},
	})
	if err != nil {
		panic(err)
	}
	// The inspect type embeds a Docker type libdocker does not re-export: decode it.
	var j libdocker.ContainerJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		panic(err)
	}
	return j
}

func statsTestService(t *testing.T, f *statsFakeDocker) *Service {
	t.Helper()
	cps, err := checkpoint.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return newService(serviceParts{docker: f, checkpoints: cps}, Options{}, zaptest.NewLogger(t))
}

func TestStatsCPUTracker(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	type step struct {
		usage uint64
		at    time.Duration
		want  int64 // -1: nil
	}
	for _, tc := range []struct {
		desc  string
		steps []step
	}{
		{"first sample has no rate", []step{{100, 0, -1}}},
		{"one core busy", []step{{0, 0, -1}, {1e9, time.Second, 1e9}}},
		{"half a core over two seconds", []step{{5e8, 0, -1}, {1.5e9, 2 * time.Second, 5e8}}},
		{"close samples reuse the last rate", []step{{0, 0, -1}, {1e9, time.Second, 1e9}, {1e9 + 5, time.Second + time.Millisecond, 1e9}}},
		{"close second sample has no rate yet", []step{{0, 0, -1}, {10, time.Millisecond, -1}}},
		{"older sample is ignored", []step{{0, 0, -1}, {2e9, 2 * time.Second, 1e9}, {1e9, time.Second, -1}}},
		{"counter reset starts over", []step{{0, 0, -1}, {1e9, time.Second, 1e9}, {5, 2 * time.Second, -1}, {5 + 2e9, 3 * time.Second, 2e9}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var tr cpuTracker
			for i, s := range tc.steps {
				got := tr.update(s.usage, t0.Add(s.at))
				switch {
				case s.want < 0 && got != nil:
					t.Errorf("step %d: rate %d, want nil", i, got.Value)
				case s.want >= 0 && (got == nil || got.Value != uint64(s.want)):
					t.Errorf("step %d: rate %v, want %d", i, got, s.want)
				}
			}
		})
	}
}

func TestStatsContainerFilter(t *testing.T) {
	t.Parallel()
	target := statsTarget{id: "abcdef", labels: map[string]string{labelSandboxID: "sb1234", "app": "web", labelType: typeContainer}}
	for _, tc := range []struct {
		desc string
		f    *runtimeapi.ContainerStatsFilter
		want bool
	}{
		{"nil filter", nil, true},
		{"id prefix", &runtimeapi.ContainerStatsFilter{Id: "abc"}, true},
		{"other id", &runtimeapi.ContainerStatsFilter{Id: "abd"}, false},
		{"sandbox prefix", &runtimeapi.ContainerStatsFilter{PodSandboxId: "sb12"}, true},
		{"other sandbox", &runtimeapi.ContainerStatsFilter{PodSandboxId: "sb9"}, false},
		{"label", &runtimeapi.ContainerStatsFilter{LabelSelector: map[string]string{"app": "web"}}, true},
		{"label mismatch", &runtimeapi.ContainerStatsFilter{LabelSelector: map[string]string{"app": "db"}}, false},
		{"internal labels are not selectable", &runtimeapi.ContainerStatsFilter{LabelSelector: map[string]string{labelType: typeContainer}}, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := containerStatsMatch(target, tc.f); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestStatsSampleAdd(t *testing.T) {
	t.Parallel()
	a := usageSample{cpuNanos: 1, hasCPU: true, memUsage: 10, workingSet: 5, rss: 2, pageFaults: 3, majorPageFaults: 1, hasMemory: true, memLimit: 99}
	a.add(usageSample{cpuNanos: 2, memUsage: 20, workingSet: 6, rss: 3, pageFaults: 4, majorPageFaults: 1, hasMemory: true, pids: 4, hasPids: true})
	want := usageSample{cpuNanos: 3, hasCPU: true, memUsage: 30, workingSet: 11, rss: 5, pageFaults: 7, majorPageFaults: 2, hasMemory: true, memLimit: 99, pids: 4, hasPids: true}
	if a != want {
		t.Errorf("got %+v, want %+v", a, want)
	}
}

// TestStatsEnsureSingleFlight checks that concurrent requests share one
// InspectContainerWithSize and that the result is reused within the TTL.
func TestStatsEnsureSingleFlight(t *testing.T) {
	t.Parallel()
	f := &statsFakeDocker{
		containers: map[string]libdocker.ContainerJSON{"c1": statsFakeContainer("c1", typeContainer, "sb", 7, 4096, "", nil)},
		release:    make(chan struct{}),
	}
	s := statsTestService(t, f)
	now := time.Unix(5000, 0)
	var nowMu sync.Mutex
	s.stats.now = func() time.Time { nowMu.Lock(); defer nowMu.Unlock(); return now }
	ctx := context.Background()

	const n = 10
	views := make([]statsView, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			views[i], errs[i] = s.stats.ensure(ctx, "c1", true)
		}()
	}
	// Let the goroutines pile up on the in-flight inspect, then release it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.mu.Lock()
		calls := f.sizeCalls
		f.mu.Unlock()
		if calls >= 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	close(f.release)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || views[i].pid != 7 || views[i].sizeRw != 4096 || !views[i].hasSize {
			t.Fatalf("request %d: view %+v, err %v", i, views[i], errs[i])
		}
	}
	if f.sizeCalls != 1 {
		t.Errorf("%d inspects for %d concurrent requests, want 1", f.sizeCalls, n)
	}
	if _, err := s.stats.ensure(ctx, "c1", true); err != nil || f.sizeCalls != 1 {
		t.Errorf("within TTL: err %v, %d inspects, want 1", err, f.sizeCalls)
	}
	nowMu.Lock()
	now = now.Add(statsSizeTTL + time.Second)
	nowMu.Unlock()
	if _, err := s.stats.ensure(ctx, "c1", true); err != nil || f.sizeCalls != 2 {
		t.Errorf("after TTL: err %v, %d inspects, want 2", err, f.sizeCalls)
	}
	if got := s.stats.writableLayersTotal(); got != 4096 {
		t.Errorf("writable layers total = %d, want 4096", got)
	}
	if _, err := s.stats.ensure(ctx, "gone", false); err == nil {
		t.Error("ensure of an unknown container succeeded")
	}
	s.stats.mu.Lock()
	_, kept := s.stats.entries["gone"]
	s.stats.mu.Unlock()
	if kept {
		t.Error("entry of an unknown container was kept")
	}
}

func TestStatsPrune(t *testing.T) {
	t.Parallel()
	s := statsTestService(t, &statsFakeDocker{})
	now := time.Unix(5000, 0)
	s.stats.now = func() time.Time { return now }
	s.stats.entries["old"] = &statsEntry{usedAt: now.Add(-statsEntryIdle - time.Second)}
	s.stats.entries["new"] = &statsEntry{usedAt: now.Add(-time.Second)}
	s.stats.prune()
	if _, ok := s.stats.entries["old"]; ok {
		t.Error("idle entry kept")
	}
	if _, ok := s.stats.entries["new"]; !ok {
		t.Error("recent entry dropped")
	}
}

func TestStatsImageFsMountpoint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		info libdocker.Info
		want string
	}{
		{"root and driver", libdocker.Info{DockerRootDir: "/data/docker", Driver: "overlay2"}, "/data/docker/overlay2"},
		{"no driver", libdocker.Info{DockerRootDir: "/data/docker"}, "/data/docker"},
		{"defaults", libdocker.Info{}, "/var/lib/docker"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := imageFsMountpoint(tc.info); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
