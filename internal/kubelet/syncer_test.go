package kubelet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podworkers"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/status"
)

func runningStatus(pod *v1.Pod, ip string) *kubecontainer.PodStatus {
	return &kubecontainer.PodStatus{
		ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace, IPs: []string{ip},
		SandboxStatuses: []*runtimeapi.PodSandboxStatus{{
			Id: "sb", State: runtimeapi.PodSandboxState_SANDBOX_READY,
			Network: &runtimeapi.PodSandboxNetworkStatus{Ip: ip},
		}},
		ContainerStatuses: []*kubecontainer.ContainerStatus{{
			ID: kubecontainer.ContainerID{Type: "docker", ID: "c1"}, Name: "c", State: kubecontainer.StateRunning,
			StartedAt: time.Unix(1000, 0), CreatedAt: time.Unix(999, 0), Image: "busybox", ImageRef: "docker-pullable://busybox@sha256:1",
		}},
	}
}

func TestSyncPodRunsThePod(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ready()
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.k.syncer.setProbeContext(runCtx)
	pod := staticPod("web", "uid-web", func(p *v1.Pod) {
		p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	})
	ps := runningStatus(pod, "10.1.0.5")

	terminal, err := e.k.syncer.SyncPod(context.Background(), podworkers.SyncPodCreate, pod, ps)
	if err != nil || terminal {
		t.Fatalf("SyncPod = %v, %v", terminal, err)
	}
	for _, d := range []string{"", "volumes", "plugins"} {
		if _, err := os.Stat(filepath.Join(e.root, "pods", "uid-web", d)); err != nil {
			t.Errorf("pod directory %q: %v", d, err)
		}
	}
	if len(e.volumes.mounted) != 1 {
		t.Errorf("volumes mounted %d times", len(e.volumes.mounted))
	}
	if _, ok, _ := e.helper.volume(pod.UID, "data"); !ok {
		t.Error("volume info not handed to the runtime helper")
	}
	if len(e.prober.added) != 1 || e.prober.addCtx != runCtx {
		t.Error("probes not started under the run context")
	}
	syncs := e.runtime.syncs()
	if len(syncs) != 1 || syncs[0].status != ps || syncs[0].backOff != e.k.syncer.backOff || syncs[0].backOff == nil {
		t.Fatalf("runtime SyncPod calls = %+v, want one with the status and the crash-loop back-off", syncs)
	}
	st, ok := e.k.status.GetPodStatus(pod.UID)
	if !ok || st.Phase != v1.PodRunning || st.PodIP != "10.1.0.5" || st.HostIP != "192.168.1.10" {
		t.Fatalf("status = %+v", st)
	}
	if st.StartTime == nil {
		t.Error("no start time")
	}
}

// TestSyncPodHostNetworkPodIPs: the runtime starts a host-network pod's
// containers with the node's IP as the pod IP (status.podIP in the downward
// API), which its sandbox does not report, as upstream does (#24576); the
// status it was handed stays as it was.
func TestSyncPodHostNetworkPodIPs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ready()
	pod := staticPod("hostnet", "uid-hostnet", func(p *v1.Pod) { p.Spec.HostNetwork = true })
	ps := &kubecontainer.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}

	if _, err := e.k.syncer.SyncPod(context.Background(), podworkers.SyncPodCreate, pod, ps); err != nil {
		t.Fatal(err)
	}
	syncs := e.runtime.syncs()
	if len(syncs) != 1 {
		t.Fatalf("runtime SyncPod calls = %d, want 1", len(syncs))
	}
	if got := syncs[0].status.IPs; !slices.Equal(got, []string{"192.168.1.10"}) {
		t.Errorf("pod IPs handed to the runtime = %v, want the node IP", got)
	}
	if len(ps.IPs) != 0 {
		t.Errorf("the caller's status was changed: IPs %v", ps.IPs)
	}
}

// TestSyncPodTellsPLEGOfChanges: a sync that acted on the pod in the runtime
// (its result lists actions) tells the PLEG, so the worker's next status is
// read after the action; a sync that did nothing does not.
func TestSyncPodTellsPLEGOfChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ready()
	pod := staticPod("web", "uid-web")
	ps := runningStatus(pod, "10.1.0.5")
	if _, err := e.k.syncer.SyncPod(context.Background(), podworkers.SyncPodSync, pod, ps); err != nil {
		t.Fatal(err)
	}
	if got := e.pleg.changes(); len(got) != 0 {
		t.Errorf("a sync without actions told the PLEG of changes to %v", got)
	}
	e.runtime.mu.Lock()
	e.runtime.syncResult = kubecontainer.PodSyncResult{SyncResults: []*kubecontainer.SyncResult{{Action: kubecontainer.StartContainer, Target: "c"}}}
	e.runtime.mu.Unlock()
	if _, err := e.k.syncer.SyncPod(context.Background(), podworkers.SyncPodSync, pod, ps); err != nil {
		t.Fatal(err)
	}
	if got := e.pleg.changes(); !slices.Equal(got, []k8stypes.UID{pod.UID}) {
		t.Errorf("PodChanged calls %v, want one for %s", got, pod.UID)
	}
}

func TestSyncPodTerminalPhaseStops(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ready()
	pod := staticPod("job", "uid-job", func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever })
	ps := runningStatus(pod, "10.1.0.6")
	ps.ContainerStatuses[0].State, ps.ContainerStatuses[0].ExitCode = kubecontainer.StateExited, 0
	terminal, err := e.k.syncer.SyncPod(context.Background(), podworkers.SyncPodSync, pod, ps)
	if err != nil || !terminal {
		t.Fatalf("SyncPod = %v, %v; want terminal", terminal, err)
	}
	if len(e.runtime.syncs()) != 0 || len(e.volumes.mounted) != 0 {
		t.Error("a terminal pod was synced")
	}
	if st, _ := e.k.status.GetPodStatus(pod.UID); st.Phase != v1.PodSucceeded {
		t.Errorf("phase = %s", st.Phase)
	}
}

func TestSyncPodErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc      string
		mod       func(e *env, p *v1.Pod)
		wantErr   string
		wantEvent string
		wantSync  bool
	}{
		{
			desc: "mount failure",
			mod: func(e *env, _ *v1.Pod) {
				e.volumes.mountErr = errors.New("configMap volume \"cfg\" needs an API server")
			},
			wantErr: "mount volumes", wantEvent: "Warning FailedMount: Unable to attach or mount volumes",
		},
		{
			desc: "resource claims (DRA) are refused, not ignored",
			mod: func(_ *env, p *v1.Pod) {
				p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu"}}
			},
			wantErr: "dynamic resource allocation (spec.resourceClaims) is not supported", wantEvent: "Warning FailedPrepareDynamicResources: Failed to prepare dynamic resources",
		},
		{
			desc: "network not ready",
			mod: func(e *env, _ *v1.Pod) {
				e.runtime.notReady = true
				e.ready()
			},
			wantErr: networkNotReadyMsg, wantEvent: "Warning NetworkNotReady",
		},
		{
			desc: "network not ready is fine on the host network",
			mod: func(e *env, p *v1.Pod) {
				e.runtime.notReady = true
				e.ready()
				p.Spec.HostNetwork = true
			},
			wantSync: true,
		},
		{
			desc: "crash-loop back-off only is no error",
			mod: func(e *env, _ *v1.Pod) {
				e.runtime.syncResult = kubecontainer.PodSyncResult{SyncResults: []*kubecontainer.SyncResult{
					{Action: kubecontainer.StartContainer, Target: "c", Error: kubecontainer.ErrCrashLoopBackOff, Message: "back-off 10s"}}}
			},
			wantSync: true,
		},
		{
			desc: "image pull failure is an error",
			mod: func(e *env, _ *v1.Pod) {
				e.runtime.syncResult = kubecontainer.PodSyncResult{SyncResults: []*kubecontainer.SyncResult{
					{Action: kubecontainer.StartContainer, Target: "c", Error: kubecontainer.ErrImagePull, Message: "not found"}}}
			},
			wantSync: true, wantErr: "ErrImagePull",
		},
		{
			desc: "sync error",
			mod: func(e *env, _ *v1.Pod) {
				e.runtime.syncResult = kubecontainer.PodSyncResult{SyncError: errors.New("boom")}
			},
			wantSync: true, wantErr: "boom",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.ready()
			pod := staticPod("p", "uid-p")
			tc.mod(e, pod)
			_, err := e.k.syncer.SyncPod(context.Background(), podworkers.SyncPodSync, pod, runningStatus(pod, "10.1.0.7"))
			if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error = %v, want %q", err, tc.wantErr)
			}
			if got := len(e.runtime.syncs()) > 0; got != tc.wantSync {
				t.Errorf("runtime synced = %v, want %v", got, tc.wantSync)
			}
			if tc.wantEvent != "" {
				ev := e.events.all()
				if len(ev) != 1 || !strings.HasPrefix(ev[0], tc.wantEvent) {
					t.Errorf("events = %v, want %q", ev, tc.wantEvent)
				}
			}
		})
	}
}

func TestSyncPodReasonsBecomeWaitingState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ready()
	pod := staticPod("p", "uid-p")
	ps := runningStatus(pod, "10.1.0.8")
	ps.ContainerStatuses = nil
	e.runtime.syncResult = kubecontainer.PodSyncResult{SyncResults: []*kubecontainer.SyncResult{
		{Action: kubecontainer.StartContainer, Target: "c", Error: kubecontainer.ErrImagePull, Message: "pull access denied"}}}
	_, _ = e.k.syncer.SyncPod(context.Background(), podworkers.SyncPodCreate, pod, ps)
	e.runtime.syncResult = kubecontainer.PodSyncResult{}
	// the next sync shows the failure of the previous one
	if _, err := e.k.syncer.SyncPod(context.Background(), podworkers.SyncPodSync, pod, ps); err != nil {
		t.Fatal(err)
	}
	st, _ := e.k.status.GetPodStatus(pod.UID)
	w := st.ContainerStatuses[0].State.Waiting
	if w == nil || w.Reason != "ErrImagePull" || w.Message != "pull access denied" {
		t.Errorf("waiting = %+v, want ErrImagePull", w)
	}
	if st.Phase != v1.PodPending {
		t.Errorf("phase = %s", st.Phase)
	}
}

func TestSyncTerminatingPod(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc          string
		stillRunning  bool
		killErr       error
		wantErr       string
		wantTerminate bool
	}{
		{desc: "containers stopped", wantTerminate: true},
		{desc: "container still running after kill", stillRunning: true, wantErr: "running containers"},
		{desc: "kill fails", killErr: errors.New("stop failed"), wantErr: "stop failed"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.ready()
			pod := staticPod("p", "uid-p", func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever })
			ps := runningStatus(pod, "10.1.0.9")
			stopped := runningStatus(pod, "")
			stopped.IPs = nil
			if !tc.stillRunning {
				stopped.ContainerStatuses[0].State = kubecontainer.StateExited
				stopped.ContainerStatuses[0].ExitCode = 137
				stopped.ContainerStatuses[0].Reason = "Error"
			}
			e.runtime.statuses[pod.UID] = stopped
			e.runtime.killErr = tc.killErr
			grace := int64(5)
			err := e.k.syncer.SyncTerminatingPod(context.Background(), pod, ps, &grace)
			if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want %q", err, tc.wantErr)
			}
			if len(e.prober.removed) != 1 {
				t.Error("probes not removed")
			}
			kills := e.runtime.kills()
			if len(kills) != 1 || kills[0].running != nil || *kills[0].grace != 5 {
				t.Fatalf("kills = %+v, want one with grace 5 and no running pod", kills)
			}
			if got := e.pleg.changes(); !slices.Equal(got, []k8stypes.UID{pod.UID}) {
				t.Errorf("PodChanged calls %v after KillPod, want one for %s", got, pod.UID)
			}
			if tc.killErr != nil && !strings.Contains(strings.Join(e.events.all(), ""), "FailedKillPod") {
				t.Error("no FailedKillPod event")
			}
			if !tc.wantTerminate {
				return
			}
			st, _ := e.k.status.GetPodStatus(pod.UID)
			c := st.ContainerStatuses[0]
			if c.State.Terminated == nil || c.State.Terminated.ExitCode != 137 || st.Phase != v1.PodFailed {
				t.Errorf("status = %s %+v, want Failed with the container terminated", st.Phase, c.State)
			}
			if st.PodIP != "10.1.0.9" {
				t.Errorf("pod IP = %q, want the one from before the kill", st.PodIP)
			}
		})
	}
}

func TestSyncTerminatingOrphanHasNoStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	placeholder := &v1.Pod{}
	placeholder.UID, placeholder.Name, placeholder.Namespace = "uid-o", "o", "default"
	if err := e.k.syncer.SyncTerminatingPod(context.Background(), placeholder, nil, ptr(int64(1))); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.k.status.GetPodStatus("uid-o"); ok {
		t.Error("orphan got a status")
	}
	if len(e.runtime.kills()) != 1 {
		t.Error("orphan not killed")
	}
}

func TestSyncTerminatedPod(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ready()
	pod := staticPod("p", "uid-p", func(p *v1.Pod) {
		p.Annotations = nil // an API pod: TerminatePod moves it to Failed
	})
	e.k.status.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{
		{Name: "c", ContainerID: "docker://c1", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}})
	e.helper.SetVolumes(pod.UID, nil)
	if err := e.k.syncer.SyncTerminatedPod(context.Background(), pod, &kubecontainer.PodStatus{ID: pod.UID}); err != nil {
		t.Fatal(err)
	}
	if len(e.volumes.unmounted) != 1 || e.volumes.unmounted[0] != pod.UID {
		t.Errorf("unmounted = %v", e.volumes.unmounted)
	}
	if _, _, known := e.helper.volume(pod.UID, ""); known {
		t.Error("volume records kept")
	}
	st, _ := e.k.status.GetPodStatus(pod.UID)
	if st.Phase != v1.PodFailed {
		t.Errorf("phase = %s, want Failed", st.Phase)
	}
	c := st.ContainerStatuses[0]
	if c.State.Terminated == nil || c.State.Terminated.Reason != status.ContainerReasonStatusUnknown {
		t.Errorf("container state = %+v, want ContainerStatusUnknown", c.State)
	}
}

// fakeCgroups records the pod cgroup calls.
type fakeCgroups struct {
	mu        sync.Mutex
	existing  map[k8stypes.UID]bool
	ensured   []k8stypes.UID
	destroyed []k8stypes.UID
	qos       int
	orphans   []map[k8stypes.UID]bool
}

func (f *fakeCgroups) PodCgroupExists(p *v1.Pod) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.existing[p.UID]
}

func (f *fakeCgroups) EnsurePod(p *v1.Pod, _ []*v1.Pod) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ensured = append(f.ensured, p.UID)
	f.existing[p.UID] = true
	return nil
}

func (f *fakeCgroups) DestroyPod(uid k8stypes.UID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.destroyed = append(f.destroyed, uid)
	delete(f.existing, uid)
	return nil
}

func (f *fakeCgroups) UpdateQoS([]*v1.Pod) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.qos++
	return nil
}

func (f *fakeCgroups) CleanupOrphans(active map[k8stypes.UID]bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.orphans = append(f.orphans, active)
	return nil
}

func (f *fakeCgroups) PodCgroupResources(*v1.Pod) (kubecontainer.PodCgroupResources, error) {
	return kubecontainer.PodCgroupResources{}, nil
}

// The pod's cgroup is made before the runtime syncs the pod; a pod whose
// containers run without one (a kubelet upgraded from one that made none) is
// killed first; the cgroup goes when the pod terminated.
func TestSyncPodCgroups(t *testing.T) {
	t.Parallel()
	cg := &fakeCgroups{existing: map[k8stypes.UID]bool{}}
	e := newEnv(t, func(o *Options) { o.Parts.Cgroups = cg })
	e.ready()
	fresh := staticPod("fresh", "uid-fresh")
	if _, err := e.k.syncer.SyncPod(context.Background(), podworkers.SyncPodCreate, fresh, nil); err != nil {
		t.Fatal(err)
	}
	if len(cg.ensured) != 1 || cg.ensured[0] != "uid-fresh" || len(e.runtime.kills()) != 0 {
		t.Fatalf("new pod: ensured %v, kills %d; want its cgroup made and nothing killed", cg.ensured, len(e.runtime.kills()))
	}
	adopted := staticPod("adopted", "uid-adopted")
	if _, err := e.k.syncer.SyncPod(context.Background(), podworkers.SyncPodSync, adopted, runningStatus(adopted, "10.1.0.6")); err != nil {
		t.Fatal(err)
	}
	if len(e.runtime.kills()) != 1 || e.runtime.kills()[0].pod.UID != "uid-adopted" || len(cg.ensured) != 2 {
		t.Fatalf("running pod without a cgroup: kills %+v, ensured %v; want it killed, then its cgroup made", e.runtime.killCalls, cg.ensured)
	}
	// An existing cgroup is left alone.
	if _, err := e.k.syncer.SyncPod(context.Background(), podworkers.SyncPodSync, adopted, runningStatus(adopted, "10.1.0.6")); err != nil {
		t.Fatal(err)
	}
	if len(e.runtime.kills()) != 1 || len(cg.ensured) != 2 {
		t.Fatalf("second sync: kills %d, ensured %v", len(e.runtime.kills()), cg.ensured)
	}
	if err := e.k.syncer.SyncTerminatedPod(context.Background(), adopted, runningStatus(adopted, "10.1.0.6")); err != nil {
		t.Fatal(err)
	}
	if len(cg.destroyed) != 1 || cg.destroyed[0] != "uid-adopted" || cg.qos == 0 {
		t.Fatalf("terminated pod: destroyed %v, QoS updates %d", cg.destroyed, cg.qos)
	}
}

// podObjectsLog records the pods registered with the configMap and secret
// managers.
type podObjectsLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *podObjectsLog) RegisterPod(p *v1.Pod)   { l.add("register:" + string(p.UID)) }
func (l *podObjectsLog) UnregisterPod(p *v1.Pod) { l.add("unregister:" + string(p.UID)) }
func (l *podObjectsLog) add(c string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
}

// A pod is registered with the object managers at each sync, never once
// terminal, and unregistered when its volumes are torn down, as upstream's
// SyncPod and SyncTerminatedPod do.
func TestPodsRegisteredWithObjectManagers(t *testing.T) {
	t.Parallel()
	objs := &podObjectsLog{}
	e := newEnv(t, func(o *Options) { o.Parts.Objects = objs })
	e.ready()
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.k.syncer.setProbeContext(runCtx)
	web := staticPod("web", "uid-web")
	for range 2 {
		if _, err := e.k.syncer.SyncPod(context.Background(), podworkers.SyncPodSync, web, runningStatus(web, "10.1.0.5")); err != nil {
			t.Fatal(err)
		}
	}
	job := staticPod("job", "uid-job", func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever })
	done := runningStatus(job, "10.1.0.6")
	done.ContainerStatuses[0].State = kubecontainer.StateExited
	if terminal, err := e.k.syncer.SyncPod(context.Background(), podworkers.SyncPodSync, job, done); err != nil || !terminal {
		t.Fatalf("SyncPod of the finished pod = %v, %v", terminal, err)
	}
	if err := e.k.syncer.SyncTerminatedPod(context.Background(), web, &kubecontainer.PodStatus{ID: web.UID}); err != nil {
		t.Fatal(err)
	}
	want := []string{"register:uid-web", "register:uid-web", "unregister:uid-web"}
	if !slices.Equal(objs.calls, want) {
		t.Errorf("registrations %v, want %v", objs.calls, want)
	}
}
