//go:build linux

package kubeletserver

import (
	"context"
	"io"
	"net/url"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kuberuntime"
)

// runtimeHost is a HostInterface for one pod over a real runtime manager (the
// kubelet's own implementation is tested in internal/kubelet).
type runtimeHost struct {
	m   *kuberuntime.Manager
	pod *v1.Pod
}

func (h *runtimeHost) Pods() []v1.Pod { return []v1.Pod{*h.pod} }

func (h *runtimeHost) GetPodByName(namespace, name string) (*v1.Pod, bool) {
	if namespace == h.pod.Namespace && name == h.pod.Name {
		return h.pod, true
	}
	return nil, false
}

func (h *runtimeHost) GetRunningPods(ctx context.Context) ([]*v1.Pod, error) {
	pods, err := h.m.GetPods(ctx, false)
	if err != nil {
		return nil, err
	}
	var out []*v1.Pod
	for _, p := range pods {
		out = append(out, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.ID}})
	}
	return out, nil
}

// container finds the newest (or, previous, the one before) instance of a
// container of the pod.
func (h *runtimeHost) container(ctx context.Context, name string, previous bool) (kubecontainer.ContainerID, error) {
	st, err := h.m.GetPodStatus(ctx, h.pod.UID, h.pod.Name, h.pod.Namespace)
	if err != nil {
		return kubecontainer.ContainerID{}, err
	}
	all := st.ContainerStatusesByName(name)
	i := 0
	if previous {
		i = 1
	}
	if len(all) <= i {
		return kubecontainer.ContainerID{}, apierrors.NewNotFound(schema.GroupResource{Resource: "containers"}, name)
	}
	return all[i].ID, nil
}

func (h *runtimeHost) GetContainerLogs(ctx context.Context, _, _, container string, opts *v1.PodLogOptions, stdout, stderr io.Writer) error {
	id, err := h.container(ctx, container, opts.Previous)
	if err != nil {
		return err
	}
	if stdout != nil {
		_, _ = stdout.Write(nil)
	}
	return h.m.GetContainerLogs(ctx, id, opts, stdout, stderr)
}

func (h *runtimeHost) GetExec(ctx context.Context, _, _ string, _ k8stypes.UID, container string, cmd []string, o remotecommand.Options) (*url.URL, error) {
	id, err := h.container(ctx, container, false)
	if err != nil {
		return nil, err
	}
	return h.m.GetExec(ctx, id, cmd, o.Stdin, o.Stdout, o.Stderr, o.TTY)
}

func (h *runtimeHost) GetAttach(ctx context.Context, _, _ string, _ k8stypes.UID, container string, o remotecommand.Options) (*url.URL, error) {
	id, err := h.container(ctx, container, false)
	if err != nil {
		return nil, err
	}
	return h.m.GetAttach(ctx, id, o.Stdin, o.Stdout, o.Stderr, false)
}

func (h *runtimeHost) GetPortForward(ctx context.Context, _, _ string, _ k8stypes.UID, o portforward.V4Options) (*url.URL, error) {
	return h.m.GetPortForward(ctx, h.pod.UID, o.Ports)
}

func (h *runtimeHost) RunInContainer(ctx context.Context, _, _ string, _ k8stypes.UID, container string, cmd []string) ([]byte, error) {
	id, err := h.container(ctx, container, false)
	if err != nil {
		return nil, err
	}
	return h.m.RunInContainer(ctx, id, cmd, 0)
}

func (h *runtimeHost) CheckpointContainer(ctx context.Context, _, _ string, _ k8stypes.UID, container string, opts *runtimeapi.CheckpointContainerRequest) error {
	id, err := h.container(ctx, container, false)
	if err != nil {
		return err
	}
	opts.ContainerId = id.ID
	return h.m.CheckpointContainer(ctx, opts)
}

// podsHelper is the RuntimeHelper of the test pod: a directory per container.
type podsHelper struct{ dir string }

func (h *podsHelper) GenerateRunContainerOptions(_ context.Context, pod *v1.Pod, c *v1.Container, _ string, _ []string) (*kubecontainer.RunContainerOptions, func(), error) {
	return &kubecontainer.RunContainerOptions{Hostname: pod.Name,
		PodContainerDir: filepath.Join(h.dir, string(pod.UID), "containers", c.Name)}, nil, nil
}
func (h *podsHelper) GetPodDNS(*v1.Pod) (*runtimeapi.DNSConfig, error) {
	return &runtimeapi.DNSConfig{}, nil
}
func (h *podsHelper) GetPodCgroupParent(*v1.Pod) string { return "" }
func (h *podsHelper) GetPodDir(uid k8stypes.UID) string { return filepath.Join(h.dir, string(uid)) }
func (h *podsHelper) GeneratePodHostNameAndDomain(pod *v1.Pod) (string, string, error) {
	return pod.Name, "", nil
}
func (h *podsHelper) GetExtraSupplementalGroupsForPod(*v1.Pod) []int64 { return nil }
