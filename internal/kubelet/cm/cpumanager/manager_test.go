package cpumanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/cpuset"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

func newManager(t *testing.T, dir string, details CPUDetails, policy string, mod ...func(*Options)) *Manager {
	t.Helper()
	opts := Options{
		Policy:           policy,
		ReservedMilliCPU: 1000,
		StateDir:         dir,
		Topology:         mustTopology(t, details),
		Logger:           zaptest.NewLogger(t),
	}
	for _, f := range mod {
		f(&opts)
	}
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func podsFunc(pods ...*v1.Pod) func() []*v1.Pod { return func() []*v1.Pod { return pods } }

func allocateAll(t *testing.T, m *Manager, pod *v1.Pod) error {
	t.Helper()
	for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if err := m.Allocate(pod, podContainer(pod, c.Name)); err != nil {
			return err
		}
	}
	return nil
}

func readState(t *testing.T, dir, policy string) *state {
	t.Helper()
	st, found, err := stateFile{dir: dir, policy: policy}.load()
	if err != nil || !found {
		t.Fatalf("load state: found=%v err=%v", found, err)
	}
	return st
}

func TestManagerStartCreatesStateFile(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		policy string
		want   string
	}{
		{"static", `{"policyName":"static","defaultCpuSet":"0-1","checksum":1636926438,"data":"{\"policyName\":\"static\",\"defaultCpuSet\":\"0-1\"}","dataChecksum":989860433}`},
		{"none", `{"policyName":"none","defaultCpuSet":"","checksum":1353318690,"data":"{\"policyName\":\"none\",\"defaultCpuSet\":\"\"}","dataChecksum":3028111495}`},
	} {
		t.Run(test.policy, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "kubelet")
			m := newManager(t, dir, twoCPUs, test.policy)
			if err := m.start(podsFunc(), nil); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(dir, StateFileName))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != test.want {
				t.Errorf("state file\n%s\nwant\n%s", got, test.want)
			}
			fi, err := os.Stat(filepath.Join(dir, StateFileName))
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("state file mode = %v (%v), want 0600", fi.Mode(), err)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("leftover files in %s: %v", dir, entries)
			}
		})
	}
}

func TestManagerRestartKeepsAssignments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pod := makePod("g2", nil, ctr("app", "2"))
	m := newManager(t, dir, eightCPUsSMT, "static")
	if err := m.start(podsFunc(), nil); err != nil {
		t.Fatal(err)
	}
	if err := allocateAll(t, m, pod); err != nil {
		t.Fatal(err)
	}
	m2 := newManager(t, dir, eightCPUsSMT, "static")
	if err := m2.start(podsFunc(pod), nil); err != nil {
		t.Fatal(err)
	}
	if got, ok := m2.CPUSet("g2", "app"); !ok || got.String() != "1,5" {
		t.Errorf("CPUSet after restart = %q, %v; want 1,5", got, ok)
	}
	if got := m2.DefaultCPUSet().String(); got != "0,2-4,6-7" {
		t.Errorf("default after restart = %q", got)
	}
	if got := m2.Assignments(); len(got) != 1 || got["g2"]["app"].String() != "1,5" {
		t.Errorf("assignments after restart = %v", got)
	}
}

func TestManagerStartDropsInactivePods(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		desc     string
		ready    bool
		wantKeep bool
	}{
		{desc: "sources ready: dropped", ready: true},
		{desc: "sources not ready: kept", ready: false, wantKeep: true},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pod := makePod("g2", nil, ctr("app", "2"))
			m := newManager(t, dir, eightCPUsSMT, "static")
			if err := m.start(podsFunc(pod), nil); err != nil {
				t.Fatal(err)
			}
			if err := allocateAll(t, m, pod); err != nil {
				t.Fatal(err)
			}
			m2 := newManager(t, dir, eightCPUsSMT, "static")
			if err := m2.start(podsFunc(), func() bool { return test.ready }); err != nil {
				t.Fatal(err)
			}
			_, kept := m2.Assignments()["g2"]
			if kept != test.wantKeep {
				t.Fatalf("assignment kept = %v, want %v", kept, test.wantKeep)
			}
			onDisk := readState(t, dir, "static")
			if _, kept := onDisk.assignments["g2"]; kept != test.wantKeep {
				t.Errorf("assignment kept on disk = %v, want %v", kept, test.wantKeep)
			}
			if !test.wantKeep && onDisk.defaultSet.String() != "0-7" {
				t.Errorf("pool on disk = %q, want 0-7", onDisk.defaultSet)
			}
		})
	}
}

func TestManagerStartErrors(t *testing.T) {
	t.Parallel()
	static := func(t *testing.T, dir string) {
		m := newManager(t, dir, twoCPUs, "static")
		if err := m.start(podsFunc(), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, test := range []struct {
		desc     string
		prepare  func(t *testing.T, dir string)
		policy   string
		details  CPUDetails
		wantErr  string // the cause inside upstream's wrapping
		wrapped  bool   // wrapped in "could not restore state from checkpoint"
		corrupt  bool
		reserved cpuset.CPUSet
	}{
		{desc: "policy switched to none", prepare: static, policy: "none", details: twoCPUs, wrapped: true,
			wantErr: `configured policy "none" differs from state checkpoint policy "static"`},
		{desc: "policy switched to static", policy: "static", details: twoCPUs, wrapped: true,
			prepare: func(t *testing.T, dir string) {
				if err := newManager(t, dir, twoCPUs, "none").start(podsFunc(), nil); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: `configured policy "static" differs from state checkpoint policy "none"`},
		{desc: "corrupt data checksum", policy: "static", details: twoCPUs, wrapped: true, corrupt: true,
			prepare: func(t *testing.T, dir string) {
				static(t, dir)
				path := filepath.Join(dir, StateFileName)
				b, _ := os.ReadFile(path)
				b = []byte(strings.Replace(string(b), `"dataChecksum":989860433`, `"dataChecksum":1`, 1))
				if err := os.WriteFile(path, b, 0o600); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: "could not load v4 checkpoint: checkpoint is corrupted"},
		{desc: "bad default set", policy: "static", details: twoCPUs, wrapped: true,
			prepare: func(t *testing.T, dir string) {
				// A valid v4 file whose data holds an unparsable set.
				data := `{"policyName":"static","defaultCpuSet":"x"}`
				b := []byte(fmt.Sprintf(`{"policyName":"static","defaultCpuSet":"x","checksum":0,"data":%q,"dataChecksum":%d}`, data, dataChecksum(data)))
				if err := os.WriteFile(filepath.Join(dir, StateFileName), b, 0o600); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: `could not parse default CPU set "x": strconv.Atoi: parsing "x": invalid syntax`},
		{desc: "machine lost a CPU", prepare: static, policy: "static",
			details: CPUDetails{0: {CoreID: 0}},
			wantErr: `current set of available CPUs "0" doesn't match with CPUs in state "0-1"`},
		{desc: "reserved CPU changed to one that is assigned", policy: "static", details: eightCPUsSMT,
			reserved: set(1),
			prepare: func(t *testing.T, dir string) {
				m := newManager(t, dir, eightCPUsSMT, "static")
				if err := m.start(podsFunc(), nil); err != nil {
					t.Fatal(err)
				}
				if err := allocateAll(t, m, makePod("g2", nil, ctr("app", "2"))); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: `not all reserved cpus: "1" are present in defaultCpuSet: "0,2-4,6-7"`},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			test.prepare(t, dir)
			m := newManager(t, dir, test.details, test.policy, func(o *Options) { o.ReservedCPUs = test.reserved })
			err := m.start(podsFunc(), nil)
			if err == nil {
				t.Fatal("Start succeeded")
			}
			want := test.wantErr
			if test.wrapped {
				want = fmt.Sprintf("could not restore state from checkpoint: %s, please drain this node and delete the CPU manager checkpoint file %q before restarting Kubelet",
					test.wantErr, filepath.Join(dir, StateFileName))
			}
			if err.Error() != want {
				t.Fatalf("err =\n%v\nwant\n%s", err, want)
			}
			if test.corrupt && !errors.Is(err, ErrCorruptCheckpoint) {
				t.Errorf("errors.Is(err, ErrCorruptCheckpoint) = false")
			}
		})
	}
}

func TestManagerReleaseOnRemoval(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := newManager(t, dir, eightCPUsSMT, "static")
	if err := m.start(nil, nil); err != nil {
		t.Fatal(err)
	}
	a := makePod("a", nil, ctr("app", "2"), ctr("side", "1"))
	b := makePod("b", nil, ctr("app", "2"))
	for _, p := range []*v1.Pod{a, b} {
		if err := allocateAll(t, m, p); err != nil {
			t.Fatal(err)
		}
	}
	// a/app {1,5}, a/side {4} (the free thread of core 0), b/app {2,6}.
	want := map[string]string{"a/app": "1,5", "a/side": "4", "b/app": "2,6"}
	for key, w := range want {
		pod, name, _ := strings.Cut(key, "/")
		if got, _ := m.CPUSet(pod, name); got.String() != w {
			t.Fatalf("%s = %q, want %q", key, got, w)
		}
	}
	if err := m.RemoveContainer("a", "side"); err != nil {
		t.Fatal(err)
	}
	if got := readState(t, dir, "static").defaultSet.String(); got != "0,3-4,7" {
		t.Errorf("pool on disk after RemoveContainer = %q, want 0,3-4,7", got)
	}
	if err := m.RemovePod("a"); err != nil {
		t.Fatal(err)
	}
	st := readState(t, dir, "static")
	if got := st.defaultSet.String(); got != "0-1,3-5,7" {
		t.Errorf("pool on disk after RemovePod = %q, want 0-1,3-5,7", got)
	}
	if _, ok := st.assignments["a"]; ok || len(st.assignments["b"]) != 1 {
		t.Errorf("assignments on disk = %v", st.assignments)
	}
	if got, ok := m.CPUSet("a", "app"); !ok || got.String() != "0-1,3-5,7" {
		t.Errorf("removed container now gets %q, %v; want the pool", got, ok)
	}
	// Exclusive CPUs (the PodResources API's, admission's Holds): b/app's,
	// none for a container in the shared pool.
	if got, ok := m.ExclusiveCPUs("b", "app"); !ok || got.String() != "2,6" {
		t.Errorf("ExclusiveCPUs(b/app) = %q, %v; want 2,6", got, ok)
	}
	if got, ok := m.ExclusiveCPUs("a", "app"); ok {
		t.Errorf("ExclusiveCPUs of a container in the shared pool = %q, true", got)
	}
	if got := m.AllocatableCPUs().String(); got != "1-7" {
		t.Errorf("AllocatableCPUs = %q, want all but the reserved CPU 0", got)
	}
}

func TestManagerAllocateNotEnoughCPUs(t *testing.T) {
	t.Parallel()
	m := newManager(t, t.TempDir(), twoCPUs, "static")
	if err := m.start(nil, nil); err != nil {
		t.Fatal(err)
	}
	pod := makePod("big", nil, ctr("app", "2"))
	err := allocateAll(t, m, pod)
	if err == nil || err.Error() != "not enough cpus available to satisfy request: requested=2, available=1" {
		t.Fatalf("err = %v", err)
	}
	if len(m.Assignments()) != 0 || m.SharedPool().String() != "0-1" {
		t.Errorf("failed allocation changed the state: %v %q", m.Assignments(), m.SharedPool())
	}
}

func TestManagerNonePolicy(t *testing.T) {
	t.Parallel()
	m := newManager(t, t.TempDir(), twoCPUs, "none")
	if err := m.start(nil, nil); err != nil {
		t.Fatal(err)
	}
	pod := makePod("g1", nil, ctr("app", "1"))
	if err := allocateAll(t, m, pod); err != nil {
		t.Fatal(err)
	}
	if set, ok := m.CPUSet("g1", "app"); ok {
		t.Errorf("CPUSet = %q, true; want nothing for policy none", set)
	}
	if set := m.AllocatableCPUs(); !set.IsEmpty() {
		t.Errorf("AllocatableCPUs = %q; want none for policy none", set)
	}
	if len(m.Assignments()) != 0 || !m.SharedPool().IsEmpty() {
		t.Errorf("none policy has state: %v %q", m.Assignments(), m.SharedPool())
	}
	m.Reconcile(context.Background(), podsFunc(pod), func(context.Context, string, string, cpuset.CPUSet) error {
		t.Error("update called for policy none")
		return nil
	})
}

func TestManagerReconcile(t *testing.T) {
	t.Parallel()
	m := newManager(t, t.TempDir(), eightCPUsSMT, "static")
	g := makePod("g", []v1.Container{ctr("init", "500m")}, ctr("app", "2"))
	b := makePod("b", nil, ctr("web", ""))
	pods := []*v1.Pod{g, b}
	active := func() []*v1.Pod { return pods }
	if err := m.start(active, nil); err != nil {
		t.Fatal(err)
	}
	if err := allocateAll(t, m, g); err != nil {
		t.Fatal(err)
	}
	m.AddContainer("g", "app") // created with its exclusive CPUs

	var calls []string
	failWeb := true
	update := func(_ context.Context, pod, name string, cpus cpuset.CPUSet) error {
		calls = append(calls, pod+"/"+name+"="+cpus.String())
		switch {
		case pod == "g" && name == "init":
			return fmt.Errorf("exited: %w", ErrContainerNotRunning)
		case name == "web" && failWeb:
			failWeb = false
			return errors.New("docker update failed")
		}
		return nil
	}
	round := func(want ...string) {
		t.Helper()
		calls = nil
		m.Reconcile(context.Background(), active, update)
		if strings.Join(calls, " ") != strings.Join(want, " ") {
			t.Errorf("updates = %v, want %v", calls, want)
		}
	}
	round("g/init=0,2-4,6-7", "b/web=0,2-4,6-7") // web fails, init not running
	round("g/init=0,2-4,6-7", "b/web=0,2-4,6-7") // both retried; web succeeds
	round("g/init=0,2-4,6-7")                    // web is current
	pods = []*v1.Pod{b}                          // g went away: its CPUs return
	round("b/web=0-7")
	round()
}

// fakeContainers records the cpusets the reconcile loop gives containers.
type fakeContainers struct {
	mu   sync.Mutex
	sets map[string]string // container ID -> cpuset
}

func (f *fakeContainers) UpdateContainerResources(_ context.Context, id string, r *runtimeapi.ContainerResources) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets[id] = r.GetLinux().GetCpusetCpus()
	return nil
}

func (f *fakeContainers) get(id string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sets[id]
	return s, ok
}

// TestStartRunsTheReconcileLoop: Start restores the state and, with the
// static policy, reconciles every period through the pod status cache and
// the runtime: the running container gets its exclusive CPUs, the one that
// is not running (not in the cache) nothing; the loop ends with ctx. Start
// refuses a loop without the runtime.
func TestStartRunsTheReconcileLoop(t *testing.T) {
	t.Parallel()
	g := makePod("g", nil, ctr("app", "2"), ctr("idle", "2"))
	cache := kubecontainer.NewCache()
	cache.Set("g", &kubecontainer.PodStatus{ID: "g", ContainerStatuses: []*kubecontainer.ContainerStatus{
		{Name: "app", State: kubecontainer.StateRunning, ID: kubecontainer.ContainerID{Type: "docker", ID: "app-1"}},
		{Name: "idle", State: kubecontainer.StateExited, ID: kubecontainer.ContainerID{Type: "docker", ID: "idle-1"}},
	}}, nil, time.Now())
	containers := &fakeContainers{sets: map[string]string{}}
	m := newManager(t, t.TempDir(), eightCPUsSMT, "static", func(o *Options) {
		o.ActivePods = func() []*v1.Pod { return []*v1.Pod{g} }
		o.ReconcilePeriod, o.Statuses, o.Containers = 10*time.Millisecond, cache, containers
	})
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := allocateAll(t, m, g); err != nil {
		t.Fatal(err)
	}
	want := m.Assignments()["g"]["app"].String()
	deadline := time.Now().Add(10 * time.Second)
	for got, _ := containers.get("app-1"); got != want; got, _ = containers.get("app-1") {
		if time.Now().After(deadline) {
			t.Fatalf("app's cpuset %q, want %q", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	m.Wait()
	if got, ok := containers.get("idle-1"); ok {
		t.Errorf("the exited container was given %q", got)
	}

	bare := newManager(t, t.TempDir(), eightCPUsSMT, "static", func(o *Options) { o.ReconcilePeriod = time.Second })
	if err := bare.Start(context.Background()); err == nil {
		t.Error("Start of a reconcile loop without Statuses and Containers: no error")
	}
}
