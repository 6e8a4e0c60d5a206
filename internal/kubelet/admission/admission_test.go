package admission

import (
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func admissionNode() *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"disk": "ssd", "kubernetes.io/os": "linux"}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi"),
		}},
	}
}

func admissionPod(name string, mutate func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec:       v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "i"}}},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func requests(cpu, mem string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{
			v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem),
		}
	}
}

func hostPortOn(ip string, port int32, proto v1.Protocol) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: port, HostIP: ip, Protocol: proto}}
	}
}

func TestAdmit(t *testing.T) {
	for _, tc := range []struct {
		desc       string
		pod        *v1.Pod
		node       *v1.Node
		own        v1.ResourceList // the kubelet's allocatable without a node object
		maxPods    int
		others     []*v1.Pod
		wantReason string
		wantMsg    string
	}{
		{desc: "fits", pod: admissionPod("a", requests("1", "512Mi")), node: admissionNode(),
			others: []*v1.Pod{admissionPod("b", requests("500m", "256Mi"))}},
		{desc: "no node, no allocatable: only host ports", pod: admissionPod("a", requests("100", "100Gi")), node: nil},
		{desc: "no node: requests against the kubelet's own allocatable", pod: admissionPod("a", requests("3", "1Mi")),
			own: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}, wantReason: "OutOfcpu",
			wantMsg: "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000"},
		{desc: "node full", pod: admissionPod("a", nil), node: admissionNode(), maxPods: 1,
			others: []*v1.Pod{admissionPod("b", nil)}, wantReason: "OutOfpods",
			wantMsg: "Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1"},
		{desc: "other node name", pod: admissionPod("a", func(p *v1.Pod) { p.Spec.NodeName = "n2" }), node: admissionNode(),
			wantReason: "NodeName", wantMsg: "Predicate NodeName failed: node(s) didn't match the requested node name"},
		{desc: "node selector matches", pod: admissionPod("a", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }),
			node: admissionNode()},
		{desc: "node selector mismatch", pod: admissionPod("a", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "hdd"} }),
			node: admissionNode(), wantReason: "NodeAffinity",
			wantMsg: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
		{desc: "required affinity mismatch", node: admissionNode(), wantReason: "NodeAffinity",
			pod: admissionPod("a", func(p *v1.Pod) {
				p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
					NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
						{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}}
			})},
		{desc: "cpu does not fit", pod: admissionPod("a", requests("1500m", "1Mi")), node: admissionNode(),
			others: []*v1.Pod{admissionPod("b", requests("1", "1Mi"))}, wantReason: "OutOfcpu",
			wantMsg: "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000"},
		{desc: "memory does not fit", pod: admissionPod("a", requests("1m", "2Gi")), node: admissionNode(), wantReason: "OutOfmemory",
			wantMsg: "Node didn't have enough resource: memory, requested: 2147483648, used: 0, capacity: 1073741824"},
		{desc: "host port taken", pod: admissionPod("a", hostPortOn("", 8080, "")), node: nil,
			others: []*v1.Pod{admissionPod("b", hostPortOn("127.0.0.1", 8080, v1.ProtocolTCP))}, wantReason: "NodePorts",
			wantMsg: "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"},
		{desc: "host port other protocol", pod: admissionPod("a", hostPortOn("", 8080, v1.ProtocolUDP)), node: admissionNode(),
			others: []*v1.Pod{admissionPod("b", hostPortOn("", 8080, v1.ProtocolTCP))}},
		{desc: "host port other ip", pod: admissionPod("a", hostPortOn("127.0.0.2", 8080, "")), node: admissionNode(),
			others: []*v1.Pod{admissionPod("b", hostPortOn("127.0.0.1", 8080, ""))}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			target := Target{Node: tc.node, Allocatable: tc.own, MaxPods: tc.maxPods}
			if tc.node != nil {
				target.Allocatable = tc.node.Status.Allocatable
			}
			reason, msg, ok := Admit(tc.pod, target, tc.others)
			if ok != (tc.wantReason == "") || reason != tc.wantReason {
				t.Fatalf("admit = %q %q %v, want reason %q", reason, msg, ok, tc.wantReason)
			}
			if tc.wantMsg != "" && msg != tc.wantMsg {
				t.Errorf("message %q, want %q", msg, tc.wantMsg)
			}
		})
	}
}

// TestAdmitOS runs on the Linux nodes this kubelet supports.
func TestAdmitOS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the cases assume a linux kubelet")
	}
	for _, tc := range []struct {
		desc       string
		labels     map[string]string
		os         *v1.PodOS
		selector   map[string]string
		nodeLabels map[string]string
		wantReason string
		wantMsg    string
	}{
		{desc: "neither label nor os field"},
		{desc: "matching os field", os: &v1.PodOS{Name: "linux"}},
		{desc: "matching os label", labels: map[string]string{"kubernetes.io/os": "linux"}},
		{desc: "os field of another os", os: &v1.PodOS{Name: "windows"}, wantReason: "PodOSNotSupported",
			wantMsg: "Failed to admit pod as the OS field doesn't match node OS"},
		{desc: "os label of another os", labels: map[string]string{"kubernetes.io/os": "windows"},
			wantReason: "PodOSSelectorNodeLabelDoesNotMatch",
			wantMsg:    "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"},
		{desc: "the label is checked first", labels: map[string]string{"kubernetes.io/os": "windows"},
			os: &v1.PodOS{Name: "windows"}, wantReason: "PodOSSelectorNodeLabelDoesNotMatch"},
		{desc: "empty os label", labels: map[string]string{"kubernetes.io/os": ""},
			wantReason: "PodOSSelectorNodeLabelDoesNotMatch"},
		{desc: "the node's label does not count, the kubelet's os does", labels: map[string]string{"kubernetes.io/os": "windows"},
			nodeLabels: map[string]string{"kubernetes.io/os": "windows"}, wantReason: "PodOSSelectorNodeLabelDoesNotMatch"},
		{desc: "a node selector is not the os label", selector: map[string]string{"kubernetes.io/os": "windows"},
			wantReason: "NodeAffinity"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			pod := admissionPod("a", func(p *v1.Pod) {
				p.Labels, p.Spec.OS, p.Spec.NodeSelector = tc.labels, tc.os, tc.selector
			})
			node := admissionNode()
			if tc.nodeLabels != nil {
				node.Labels = tc.nodeLabels
			}
			reason, msg, ok := Admit(pod, Target{Node: node}, nil)
			if ok != (tc.wantReason == "") || reason != tc.wantReason {
				t.Fatalf("admit = %q %q %v, want reason %q", reason, msg, ok, tc.wantReason)
			}
			if tc.wantMsg != "" && msg != tc.wantMsg {
				t.Errorf("message %q, want %q", msg, tc.wantMsg)
			}
		})
	}
}

func TestAdmitOSAgainstNodeOS(t *testing.T) {
	pod := admissionPod("a", func(p *v1.Pod) {
		p.Labels = map[string]string{"kubernetes.io/os": "windows"}
		p.Spec.OS = &v1.PodOS{Name: "windows"}
	})
	if _, _, ok := admitOS(pod, "windows"); !ok {
		t.Error("a windows pod is refused on a windows node")
	}
	if reason, _, ok := admitOS(pod, "linux"); ok || reason != ReasonOSLabelMismatch {
		t.Errorf("a windows pod on a linux node: %q %v, want %q", reason, ok, ReasonOSLabelMismatch)
	}
}
