package pleg

import (
	"context"
	"errors"
	"sync"
	"testing"

	"go.uber.org/goleak"
	k8stypes "k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// TestMain fails the package if a goroutine (a relist loop, an event stream)
// outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeRuntime is a Runtime whose pods and statuses the test sets.
type fakeRuntime struct {
	mu          sync.Mutex
	pods        []*kubecontainer.Pod
	podsErr     error
	statuses    map[k8stypes.UID]*kubecontainer.PodStatus
	statusErr   map[k8stypes.UID]error
	statusCalls map[k8stypes.UID]int
	hang        map[k8stypes.UID]chan struct{} // GetPodStatus blocks until its ctx ends or the channel closes
	listCalls   int
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{
		statuses:    map[k8stypes.UID]*kubecontainer.PodStatus{},
		statusErr:   map[k8stypes.UID]error{},
		statusCalls: map[k8stypes.UID]int{},
		hang:        map[k8stypes.UID]chan struct{}{},
	}
}

// setHang makes the pod's status reads block until their context ends, or
// (hang false) releases the blocked ones, which then answer.
func (f *fakeRuntime) setHang(uid k8stypes.UID, hang bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if release, ok := f.hang[uid]; ok && !hang {
		close(release)
		delete(f.hang, uid)
	}
	if _, ok := f.hang[uid]; hang && !ok {
		f.hang[uid] = make(chan struct{})
	}
}

func (f *fakeRuntime) setPods(pods ...*kubecontainer.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods = pods
}

func (f *fakeRuntime) setStatusErr(uid k8stypes.UID, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statusErr[uid] = err
}

func (f *fakeRuntime) setListErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.podsErr = err
}

func (f *fakeRuntime) calls(uid k8stypes.UID) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.statusCalls[uid]
}

func (f *fakeRuntime) lists() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.listCalls
}

func (f *fakeRuntime) GetPods(_ context.Context, all bool) ([]*kubecontainer.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listCalls++
	if !all {
		return nil, errors.New("fake: the PLEG must list all pods")
	}
	return f.pods, f.podsErr
}

// GetPodStatus returns the preset status or one built from the current pod list.
func (f *fakeRuntime) GetPodStatus(ctx context.Context, uid k8stypes.UID, name, ns string) (*kubecontainer.PodStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statusCalls[uid]++
	if release, ok := f.hang[uid]; ok {
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			f.mu.Lock()
			return nil, ctx.Err()
		case <-release:
			f.mu.Lock()
		}
	}
	if err := f.statusErr[uid]; err != nil {
		return nil, err
	}
	if s, ok := f.statuses[uid]; ok {
		cp := *s
		return &cp, nil
	}
	st := &kubecontainer.PodStatus{ID: uid, Name: name, Namespace: ns}
	for _, p := range f.pods {
		if p.ID != uid {
			continue
		}
		for _, c := range p.Containers {
			st.ContainerStatuses = append(st.ContainerStatuses, &kubecontainer.ContainerStatus{ID: c.ID, Name: c.Name, State: c.State})
		}
	}
	return st, nil
}

// pod builds a runtime pod; containers are "id=state" pairs, sandboxes too.
func pod(uid string, containers []*kubecontainer.Container, sandboxes ...*kubecontainer.Container) *kubecontainer.Pod {
	return &kubecontainer.Pod{ID: k8stypes.UID(uid), Name: "name-" + uid, Namespace: "ns", Containers: containers, Sandboxes: sandboxes}
}

func ctr(id string, state kubecontainer.State) *kubecontainer.Container {
	return &kubecontainer.Container{ID: kubecontainer.ContainerID{Type: "docker", ID: id}, Name: "c-" + id, State: state}
}

func ctrs(cs ...*kubecontainer.Container) []*kubecontainer.Container { return cs }
