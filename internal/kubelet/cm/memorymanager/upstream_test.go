package memorymanager

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/memorymanager/state"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/topologymanager"
)

// testdata/upstream_scenarios.json.gz holds 16 random scenarios (531
// steps) played on upstream kubelet v1.37.1's own Static policy
// (pkg/kubelet/cm/memorymanager, driven through its Policy interface with a
// topology manager store returning the step's hint) with what it returned
// at each step: the container's hints, Allocate's error, and the machine
// state and assignments after. The machine: node 0 with 4Gi of memory
// (512Mi reserved) and 512 huge pages of 2Mi, node 1 with 4Gi and none,
// node 2 with 2Gi and 128. Pods are Guaranteed with one app container and
// at times a regular init container, memory of 256Mi to 7Gi and at times
// huge pages; steps allocate a container (with a random hint or none),
// start a pod's app container (its init container's memory is released)
// or remove a pod.

type upstreamHint struct {
	Nodes     []int `json:"nodes"`
	Preferred bool  `json:"preferred"`
}

type upstreamStep struct {
	Op        string                           `json:"op"`
	Pod       string                           `json:"pod"`
	Container string                           `json:"container"`
	Init      bool                             `json:"init"`
	Requests  map[string]string                `json:"requests"`
	InitReq   map[string]string                `json:"initRequests"`
	Hint      *upstreamHint                    `json:"hint"`
	Hints     map[string][]upstreamHint        `json:"hints"`
	Err       string                           `json:"err"`
	Machine   state.NUMANodeMap                `json:"machine"`
	Entries   state.ContainerMemoryAssignments `json:"entries"`
}

func (s *upstreamStep) pod() *v1.Pod {
	rl := func(m map[string]string) v1.ResourceList {
		out := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
		for k, v := range m {
			out[v1.ResourceName(k)] = resource.MustParse(v)
		}
		return out
	}
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(s.Pod), Name: s.Pod, Namespace: "ns"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{Requests: rl(s.Requests), Limits: rl(s.Requests)}}}}}
	if s.Init {
		p.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{Requests: rl(s.InitReq), Limits: rl(s.InitReq)}}}
	}
	return p
}

func readUpstreamScenarios(t *testing.T) [][]upstreamStep {
	t.Helper()
	f, err := os.Open("testdata/upstream_scenarios.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]upstreamStep
	if err := json.NewDecoder(z).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// normalized sorts what upstream leaves in map order: the blocks of a
// container (by resource) and the nodes of a group.
func normalized(st state.State) state.State {
	st = st.Clone()
	for _, ns := range st.Machine {
		slices.Sort(ns.Cells)
	}
	for _, containers := range st.Assignments {
		for _, blocks := range containers {
			slices.SortFunc(blocks, func(a, b state.Block) int { return strings.Compare(string(a.Type), string(b.Type)) })
		}
	}
	return st
}

func TestMatchesUpstreamStaticPolicy(t *testing.T) {
	const gi = 1 << 30
	nodes := []NUMANode{
		{ID: 0, MemoryBytes: 4 * gi, HugePages: []HugePages{{PageSizeKiB: 2048, Pages: 512}}},
		{ID: 1, MemoryBytes: 4 * gi, HugePages: []HugePages{{PageSizeKiB: 2048}}},
		{ID: 2, MemoryBytes: 2 * gi, HugePages: []HugePages{{PageSizeKiB: 2048, Pages: 128}}},
	}
	for i, steps := range readUpstreamScenarios(t) {
		t.Run(fmt.Sprint("scenario", i), func(t *testing.T) {
			m, err := New(Options{Policy: PolicyStatic, Nodes: nodes, NodeReservation: reservation("512Mi"),
				ReservedMemory: []kubeletv1beta1.MemoryReservation{{NumaNode: 0, Limits: reservation("512Mi")}}, StateDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			pods := map[string]*v1.Pod{}
			for j, step := range steps {
				where := fmt.Sprintf("step %d (%s %s %s)", j, step.Op, step.Pod, step.Container)
				switch step.Op {
				case "alloc":
					pod := pods[step.Pod]
					if pod == nil {
						pod = step.pod()
						pods[step.Pod] = pod
					}
					c := &pod.Spec.Containers[0]
					if step.Container == "init" {
						c = &pod.Spec.InitContainers[0]
					}
					var got map[string][]upstreamHint
					if hints := m.TopologyHints(pod, c); hints != nil {
						got = map[string][]upstreamHint{}
						for name, list := range hints {
							got[name] = []upstreamHint{}
							for _, h := range list {
								got[name] = append(got[name], upstreamHint{Nodes: h.Affinity.Nodes(), Preferred: h.Preferred})
							}
						}
					}
					if !reflect.DeepEqual(got, step.Hints) {
						t.Fatalf("%s: hints %+v, upstream %+v", where, got, step.Hints)
					}
					var hint topologymanager.Hint
					if step.Hint != nil {
						mask, _ := topologymanager.NewMask(step.Hint.Nodes...)
						hint = topologymanager.Hint{Affinity: mask, Preferred: step.Hint.Preferred}
					}
					errText := ""
					if err := m.AllocateAligned(pod, c, hint); err != nil {
						errText = err.Error()
					}
					if errText != step.Err {
						t.Fatalf("%s: error %q, upstream %q", where, errText, step.Err)
					}
				case "startapp":
					pod := pods[step.Pod]
					m.PreStartContainer(pod, &pod.Spec.Containers[0], "")
				case "remove":
					if err := m.RemovePod(step.Pod); err != nil {
						t.Fatal(err)
					}
				}
				want := normalized(state.State{Machine: step.Machine, Assignments: step.Entries})
				if got := normalized(m.State()); !reflect.DeepEqual(got, want) {
					g, _ := json.Marshal(got)
					w, _ := json.Marshal(want)
					t.Fatalf("%s: state\n%s\nupstream\n%s", where, g, w)
				}
			}
		})
	}
}
