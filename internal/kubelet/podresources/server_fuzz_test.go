package podresources

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/cpuset"
)

// fakeDevices gives every container of every pod one GPU.
type fakeDevices struct{}

func (fakeDevices) PodDevices(k8stypes.UID) map[string]map[string][]string {
	return map[string]map[string][]string{"main": {"example.com/gpu": {"gpu-0"}}, "sidecar": {"example.com/gpu": {"gpu-1"}}}
}

func (fakeDevices) AllocatableDevices() map[string][]string {
	return map[string][]string{"example.com/gpu": {"gpu-0", "gpu-1"}}
}

// fakeCPUs gives every container CPUs 2-3.
type fakeCPUs struct{}

func (fakeCPUs) ExclusiveCPUs(string, string) (cpuset.CPUSet, bool) { return cpuset.New(2, 3), true }
func (fakeCPUs) AllocatableCPUs() cpuset.CPUSet                     { return cpuset.New(1, 2, 3) }

func fuzzPods() []*v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	return []*v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"}, Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "init"}, {Name: "sidecar", RestartPolicy: &always}},
			Containers:     []v1.Container{{Name: "main"}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "other", UID: "uid-2"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "", Namespace: "", UID: "uid-3"}},
	}
}

// FuzzGetPodResourcesRequest: any Get (and List) request off the wire is
// answered without a panic: Get gives the one pod of that name and
// namespace, or NotFound and nothing; every answer can be sent back (it
// encodes).
func FuzzGetPodResourcesRequest(f *testing.F) {
	for _, req := range []*podresourcesapi.GetPodResourcesRequest{
		{PodName: "web", PodNamespace: "default"},
		{PodName: "web", PodNamespace: "other"},
		{PodName: "web"},
		{PodName: "../web", PodNamespace: "default\x00"},
		{},
	} {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x01, 0xff}) // invalid UTF-8
	s, err := New(Options{Dir: f.TempDir(), ActivePods: fuzzPods, Devices: fakeDevices{}, CPUs: fakeCPUs{}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		list := &podresourcesapi.ListPodResourcesRequest{}
		if proto.Unmarshal(data, list) == nil {
			resp, err := s.List(ctx, list)
			if err != nil || len(resp.PodResources) != len(fuzzPods()) {
				t.Fatalf("List = %v, %v", resp, err)
			}
			mustEncode(t, resp)
		}
		req := &podresourcesapi.GetPodResourcesRequest{}
		if proto.Unmarshal(data, req) != nil {
			return // gRPC refuses the call
		}
		resp, err := s.Get(ctx, req)
		want := 0
		for _, p := range fuzzPods() {
			if p.Name == req.PodName && p.Namespace == req.PodNamespace {
				want++
			}
		}
		if err != nil {
			if resp != nil || status.Code(err) != codes.NotFound || want > 0 {
				t.Fatalf("Get(%v) = %v, %v", req, resp, err)
			}
			return
		}
		if want == 0 || resp.PodResources.Name != req.PodName || resp.PodResources.Namespace != req.PodNamespace {
			t.Fatalf("Get(%v) = %v", req, resp)
		}
		mustEncode(t, resp)
	})
}

func mustEncode(t *testing.T, m proto.Message) {
	t.Helper()
	if _, err := proto.Marshal(m); err != nil {
		t.Fatalf("answer %v cannot be sent: %v", m, err)
	}
}
