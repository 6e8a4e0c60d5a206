package volumes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/tools/record"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes/csi"
)

// fakeExpander is the CSI side of an expansion: it records NodeExpand and
// answers err.
type fakeExpander struct {
	CSIVolumes
	err     error
	expands []csi.Expansion
}

func (f *fakeExpander) NodeExpand(_ context.Context, e csi.Expansion) error {
	f.expands = append(f.expands, e)
	return f.err
}

// fakeClaimStatus applies the status patches to a claim kept as JSON and
// records them.
type fakeClaimStatus struct {
	mu      sync.Mutex
	pvc     *v1.PersistentVolumeClaim
	patches []string
}

func (f *fakeClaimStatus) PatchPersistentVolumeClaimStatus(_ context.Context, ns, name string, patch []byte) (*v1.PersistentVolumeClaim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.patches = append(f.patches, string(patch))
	var p struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, err
	}
	if p.Metadata.ResourceVersion != "" && p.Metadata.ResourceVersion != f.pvc.ResourceVersion {
		return nil, fmt.Errorf("conflict: %s != %s", p.Metadata.ResourceVersion, f.pvc.ResourceVersion)
	}
	// Applied as the API server does: a strategic merge patch.
	orig, err := json.Marshal(f.pvc)
	if err != nil {
		return nil, err
	}
	merged, err := strategicpatch.StrategicMergePatch(orig, patch, &v1.PersistentVolumeClaim{})
	if err != nil {
		return nil, err
	}
	next := &v1.PersistentVolumeClaim{}
	if err := json.Unmarshal(merged, next); err != nil {
		return nil, err
	}
	next.ResourceVersion = f.pvc.ResourceVersion
	next.ResourceVersion += "+"
	f.pvc = next
	return next.DeepCopy(), nil
}

func resizeClaim(status v1.ClaimResourceStatus) (*v1.PersistentVolumeClaim, *v1.PersistentVolume) {
	pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data", ResourceVersion: "7"},
		Status: v1.PersistentVolumeClaimStatus{Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			Conditions: []v1.PersistentVolumeClaimCondition{
				{Type: v1.PersistentVolumeClaimFileSystemResizePending, Status: v1.ConditionTrue},
				{Type: "Other", Status: v1.ConditionTrue},
			}}}
	if status != "" {
		pvc.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: status}
	}
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-data"}, Spec: v1.PersistentVolumeSpec{
		Capacity:               v1.ResourceList{v1.ResourceStorage: resource.MustParse("2Gi")},
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h"}}}}
	return pvc, pv
}

// expandClaim follows upstream's node expander: only a claim waiting for the
// node is expanded, marked NodeResizeInProgress first, then given the new
// capacity with its resize status and conditions cleared; an infeasible
// size marks it NodeResizeInfeasible with a NodeResizeError condition.
func TestExpandClaim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc        string
		status      v1.ClaimResourceStatus
		driverErr   error
		wantExpand  bool
		wantCap     string
		wantStatus  v1.ClaimResourceStatus
		wantConds   []v1.PersistentVolumeClaimConditionType
		wantEvent   string
		wantPatches int
		again       int // NodeExpand calls of a second expandClaim (-1: as many as the first)
	}{
		{desc: "controller not done", status: "", wantCap: "1Gi", wantConds: []v1.PersistentVolumeClaimConditionType{"FileSystemResizePending", "Other"}},
		{desc: "controller resizing", status: v1.PersistentVolumeClaimControllerResizeInProgress, wantCap: "1Gi",
			wantStatus: v1.PersistentVolumeClaimControllerResizeInProgress, wantConds: []v1.PersistentVolumeClaimConditionType{"FileSystemResizePending", "Other"}},
		{desc: "node resize pending", status: v1.PersistentVolumeClaimNodeResizePending, wantExpand: true, wantCap: "2Gi",
			wantConds: []v1.PersistentVolumeClaimConditionType{"Other"}, wantPatches: 2,
			wantEvent: `Normal FileSystemResizeSuccess MountVolume.NodeExpandVolume succeeded for volume "pv-data" node-1`},
		{desc: "in progress after a restart", status: v1.PersistentVolumeClaimNodeResizeInProgress, wantExpand: true, wantCap: "2Gi",
			wantConds: []v1.PersistentVolumeClaimConditionType{"Other"}, wantPatches: 1,
			wantEvent: `Normal FileSystemResizeSuccess MountVolume.NodeExpandVolume succeeded for volume "pv-data" node-1`},
		{desc: "infeasible", status: v1.PersistentVolumeClaimNodeResizePending, driverErr: fmt.Errorf("x: %w", csi.ErrExpandInfeasible),
			wantExpand: true, wantCap: "1Gi", wantStatus: v1.PersistentVolumeClaimNodeResizeInfeasible,
			wantConds: []v1.PersistentVolumeClaimConditionType{"FileSystemResizePending", "Other", "NodeResizeError"}, wantPatches: 2,
			wantEvent: `Warning VolumeResizeFailed NodeExpandVolume.NodeExpandVolume failed for volume "pv-data" : x: kubernetes.io/csi: expansion infeasible`},
		{desc: "other failure: tried again", status: v1.PersistentVolumeClaimNodeResizePending, driverErr: errors.New("busy"),
			wantExpand: true, wantCap: "1Gi", wantStatus: v1.PersistentVolumeClaimNodeResizeInProgress,
			wantConds: []v1.PersistentVolumeClaimConditionType{"FileSystemResizePending", "Other", "NodeResizeError"}, wantPatches: 2,
			wantEvent: `Warning VolumeResizeFailed NodeExpandVolume.NodeExpandVolume failed for volume "pv-data" : busy`},
		{desc: "in use: no event, not tried again at this size", status: v1.PersistentVolumeClaimNodeResizePending,
			driverErr: fmt.Errorf("x: %w", csi.ErrExpandInUse), wantExpand: true, wantCap: "1Gi", wantStatus: v1.PersistentVolumeClaimNodeResizeInProgress,
			wantConds: []v1.PersistentVolumeClaimConditionType{"FileSystemResizePending", "Other", "NodeResizeError"}, wantPatches: 2, again: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pvc, pv := resizeClaim(tc.status)
			exp := &fakeExpander{err: tc.driverErr}
			st := &fakeClaimStatus{pvc: pvc.DeepCopy()}
			rec := record.NewFakeRecorder(10)
			m := &Manager{csi: exp, claimStatus: st, recorder: rec, logger: zaptest.NewLogger(t)}
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: v1.PodSpec{NodeName: "node-1"}}
			m.expandClaim(context.Background(), pod, pvc, pv, csi.Expansion{VolumePath: "/target", StagingPath: "/staging"})
			if got := len(exp.expands) > 0; got != tc.wantExpand {
				t.Fatalf("NodeExpand called %v, want %v", got, tc.wantExpand)
			}
			if tc.again > 0 {
				m.expandClaim(context.Background(), pod, st.pvc.DeepCopy(), pv, csi.Expansion{VolumePath: "/target"})
				if len(exp.expands) != tc.again {
					t.Errorf("NodeExpand calls after a second sync: %d, want %d", len(exp.expands), tc.again)
				}
			}
			if tc.wantExpand && (exp.expands[0].NewSize != 2<<30 || exp.expands[0].VolumePath != "/target") {
				t.Errorf("expansion %+v", exp.expands[0])
			}
			if got := st.pvc.Status.Capacity[v1.ResourceStorage]; got.String() != tc.wantCap {
				t.Errorf("capacity %s, want %s", got.String(), tc.wantCap)
			}
			if got := st.pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage]; got != tc.wantStatus {
				t.Errorf("resize status %q, want %q (patches %q)", got, tc.wantStatus, st.patches)
			}
			var conds []v1.PersistentVolumeClaimConditionType
			for _, c := range st.pvc.Status.Conditions {
				conds = append(conds, c.Type)
			}
			if fmt.Sprint(conds) != fmt.Sprint(tc.wantConds) {
				t.Errorf("conditions %v, want %v", conds, tc.wantConds)
			}
			if len(st.patches) != tc.wantPatches {
				t.Errorf("patches %q, want %d", st.patches, tc.wantPatches)
			}
			close(rec.Events)
			var events []string
			for e := range rec.Events {
				events = append(events, e)
			}
			if tc.wantEvent != "" && (len(events) == 0 || !strings.HasPrefix(events[0], tc.wantEvent)) {
				t.Errorf("events %q, want %q", events, tc.wantEvent)
			}
			if tc.wantEvent == "" && len(events) > 0 {
				t.Errorf("events %q, want none", events)
			}
		})
	}
}

// A ReadWriteMany volume is expanded on every node that has it mounted:
// when another node's expansion already finished the claim, this node
// calls NodeExpandVolume once at the new size and writes the claim only to
// tell of a failure (upstream's node expander with pvcAlreadyUpdated).
func TestExpandReadWriteManyOnEveryNode(t *testing.T) {
	t.Parallel()
	rwx := []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}
	failed := func(msg string) []string {
		return []string{`Warning VolumeResizeFailed NodeExpandVolume.NodeExpandVolume failed for volume "pv-data" : ` + msg}
	}
	for _, tc := range []struct {
		desc       string
		modes      []v1.PersistentVolumeAccessMode
		annotation bool
		driverErr  error
		wantCalls  int // NodeExpand calls over two syncs after the resize
		wantEvents []string
		wantStatus v1.ClaimResourceStatus
		wantCond   bool // a NodeResizeError condition
	}{
		{desc: "expanded once", modes: rwx, wantCalls: 1, wantEvents: []string{
			`Normal FileSystemResizeSuccess MountVolume.NodeExpandVolume succeeded for volume "pv-data" node-2`,
			`Normal FileSystemResizeSuccess MountVolume.NodeExpandVolume succeeded for volume "pv-data" node-2`}},
		{desc: "not ReadWriteMany", modes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}},
		{desc: "claim says not required", modes: rwx, annotation: true},
		{desc: "driver without node expansion", modes: rwx, driverErr: fmt.Errorf("x: %w", csi.ErrExpandUnsupported), wantCalls: 1},
		{desc: "in use: not tried again", modes: rwx, driverErr: fmt.Errorf("x: %w", csi.ErrExpandInUse), wantCalls: 1, wantCond: true},
		{desc: "infeasible: the claim says so", modes: rwx, driverErr: fmt.Errorf("x: %w", csi.ErrExpandInfeasible), wantCalls: 1,
			wantEvents: failed("x: kubernetes.io/csi: expansion infeasible"), wantStatus: v1.PersistentVolumeClaimNodeResizeInfeasible, wantCond: true},
		{desc: "failure: tried again", modes: rwx, driverErr: errors.New("busy"), wantCalls: 2,
			wantEvents: append(failed("busy"), failed("busy")...), wantCond: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pvc, pv := resizeClaim("")
			pvc.Spec.AccessModes = tc.modes
			pvc.Status.Conditions = nil
			if tc.annotation {
				pvc.Annotations = map[string]string{"volume.kubernetes.io/node-expansion-not-required": "true"}
			}
			pv.Spec.Capacity[v1.ResourceStorage] = resource.MustParse("1Gi")
			exp := &fakeExpander{}
			st := &fakeClaimStatus{pvc: pvc.DeepCopy()}
			rec := record.NewFakeRecorder(10)
			m := &Manager{csi: exp, claimStatus: st, recorder: rec, logger: zaptest.NewLogger(t)}
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}, Spec: v1.PodSpec{NodeName: "node-2"}}
			m.rememberClaim(pod.UID, ClaimVolume{Name: "data", PV: pv.Name})
			e := csi.Expansion{VolumePath: "/target"}
			m.expandClaim(context.Background(), pod, pvc, pv, e) // mounted at 1Gi
			if len(exp.expands) != 0 {
				t.Fatalf("NodeExpand at mount: %+v", exp.expands)
			}
			// Another node expanded the volume and finished the claim.
			pv.Spec.Capacity[v1.ResourceStorage] = resource.MustParse("2Gi")
			st.pvc.Status.Capacity[v1.ResourceStorage] = resource.MustParse("2Gi")
			exp.err = tc.driverErr
			for range 2 {
				m.expandClaim(context.Background(), pod, st.pvc.DeepCopy(), pv, e)
			}
			if len(exp.expands) != tc.wantCalls {
				t.Fatalf("NodeExpand calls %d, want %d", len(exp.expands), tc.wantCalls)
			}
			if tc.wantCalls > 0 && exp.expands[0].NewSize != 2<<30 {
				t.Errorf("expansion %+v, want 2Gi", exp.expands[0])
			}
			if got := st.pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage]; got != tc.wantStatus {
				t.Errorf("resize status %q, want %q", got, tc.wantStatus)
			}
			hasCond := slices.ContainsFunc(st.pvc.Status.Conditions, func(c v1.PersistentVolumeClaimCondition) bool {
				return c.Type == v1.PersistentVolumeClaimNodeResizeError
			})
			if hasCond != tc.wantCond {
				t.Errorf("NodeResizeError condition %v, want %v (patches %q)", hasCond, tc.wantCond, st.patches)
			}
			if c := st.pvc.Status.Capacity[v1.ResourceStorage]; c.String() != "2Gi" {
				t.Errorf("claim capacity %s, want 2Gi as the other node left it", c.String())
			}
			close(rec.Events)
			var events []string
			for e := range rec.Events {
				events = append(events, e)
			}
			if fmt.Sprint(events) != fmt.Sprint(tc.wantEvents) {
				t.Errorf("events %q, want %q", events, tc.wantEvents)
			}
			// The pod goes: the node forgets the volume's size.
			m.forgetClaims(pod.UID)
			if len(m.nodeSize) != 0 || len(m.expandSkip) != 0 {
				t.Errorf("records left after the last pod: %v %v", m.nodeSize, m.expandSkip)
			}
		})
	}
}

// Two pods of one volume on a node sync at once: the volume is expanded
// once, and the claim finished once. (NodeResizeInProgress, as a restarted
// kubelet finds it: no resourceVersion-checked patch comes first to stop
// the second pod's expansion.)
func TestExpandOncePerVolume(t *testing.T) {
	t.Parallel()
	pvc, pv := resizeClaim(v1.PersistentVolumeClaimNodeResizeInProgress)
	exp := &slowExpander{delay: 50 * time.Millisecond}
	st := &fakeClaimStatus{pvc: pvc.DeepCopy()}
	m := &Manager{csi: exp, claimStatus: st, recorder: record.NewFakeRecorder(10), logger: zaptest.NewLogger(t)}
	var wg sync.WaitGroup
	for _, uid := range []string{"u1", "u2"} {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "ns", UID: k8stypes.UID(uid)}, Spec: v1.PodSpec{NodeName: "node-1"}}
		m.rememberClaim(pod.UID, ClaimVolume{Name: "data", PV: pv.Name})
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.expandClaim(context.Background(), pod, pvc.DeepCopy(), pv, csi.Expansion{VolumePath: "/target-" + uid})
		}()
	}
	wg.Wait()
	if n := exp.calls.Load(); n != 1 {
		t.Errorf("NodeExpand calls %d, want 1", n)
	}
	if c := st.pvc.Status.Capacity[v1.ResourceStorage]; c.String() != "2Gi" || len(st.pvc.Status.AllocatedResourceStatuses) != 0 {
		t.Errorf("claim capacity %s, resize statuses %v", c.String(), st.pvc.Status.AllocatedResourceStatuses)
	}
}

// slowExpander answers NodeExpand after delay and counts the calls.
type slowExpander struct {
	CSIVolumes
	delay time.Duration
	calls atomic.Int32
}

func (f *slowExpander) NodeExpand(context.Context, csi.Expansion) error {
	f.calls.Add(1)
	time.Sleep(f.delay)
	return nil
}
