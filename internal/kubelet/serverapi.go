package kubelet

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// The methods in this file serve the kubelet API on :10250
// (internal/kubeletserver's HostInterface): pod lookup, container logs, and the
// streaming URLs of exec, attach and port-forward. Errors a client caused carry
// an API status (apierrors NotFound / BadRequest) so the server can answer
// 404 or 400; runtime errors keep their gRPC code.

// StreamingRuntime is what the API methods need from the runtime manager
// beyond Runtime (*kuberuntime.Manager implements it).
type StreamingRuntime interface {
	GetExec(ctx context.Context, id kubecontainer.ContainerID, cmd []string, stdin, stdout, stderr, tty bool) (*url.URL, error)
	GetAttach(ctx context.Context, id kubecontainer.ContainerID, stdin, stdout, stderr, tty bool) (*url.URL, error)
	GetPortForward(ctx context.Context, podUID k8stypes.UID, ports []int32) (*url.URL, error)
	GetContainerLogs(ctx context.Context, id kubecontainer.ContainerID, opts *v1.PodLogOptions, stdout, stderr io.Writer) error
	RunInContainer(ctx context.Context, id kubecontainer.ContainerID, cmd []string, timeout time.Duration) ([]byte, error)
	CheckpointContainer(ctx context.Context, req *runtimeapi.CheckpointContainerRequest) error
}

var podsResource = schema.GroupResource{Resource: "pods"}

// GetPodByName returns the desired pod namespace/name (a static pod is found
// under its mirror pod's name, which is the same). The pod is shared: read only.
func (k *Kubelet) GetPodByName(namespace, name string) (*v1.Pod, bool) {
	return k.pods.ByFullName(namespace, name)
}

// GetRunningPods returns the pods the runtime runs (ready sandboxes, running
// containers) as API pods carrying only name, namespace, UID and the
// containers' names and images (upstream /runningpods/).
func (k *Kubelet) GetRunningPods(ctx context.Context) ([]*v1.Pod, error) {
	pods, err := k.deps.runtime.GetPods(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("list running pods: %w", err)
	}
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		api := &v1.Pod{
			TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.ID},
		}
		for _, c := range p.Containers {
			api.Spec.Containers = append(api.Spec.Containers, v1.Container{Name: c.Name, Image: c.Image})
		}
		out = append(out, api)
	}
	return out, nil
}

// GetContainerLogs writes a container's log (`kubectl logs`) to stdout and
// stderr (a nil writer drops that stream). The container is picked from the
// pod's status as upstream does: the running or last terminated instance, or
// with opts.Previous the one before. A container that never ran is a
// BadRequest ("is waiting to start").
func (k *Kubelet) GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts *v1.PodLogOptions, stdout, stderr io.Writer) error {
	pod, ok := k.GetPodByName(namespace, podName)
	if !ok {
		return apierrors.NewNotFound(podsResource, namespace+"/"+podName)
	}
	st, ok := k.status.GetPodStatus(pod.UID)
	if !ok {
		st = pod.Status // not synced yet (kubelet restart): the source's status
	}
	id, err := logContainerID(pod.Name, &st, containerName, opts != nil && opts.Previous)
	if err != nil {
		return err
	}
	if stdout != nil {
		// A first (empty) write before blocking on the log, as upstream does.
		if _, err := stdout.Write(nil); err != nil {
			return err
		}
	}
	return k.streaming.GetContainerLogs(ctx, id, opts, stdout, stderr)
}

// logContainerID picks the container instance whose log to read
// (upstream validateContainerLogStatus).
func logContainerID(podName string, st *v1.PodStatus, containerName string, previous bool) (kubecontainer.ContainerID, error) {
	cs, found := findAnyContainerStatus(st, containerName)
	if !found {
		return kubecontainer.ContainerID{}, apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q is not available", containerName, podName))
	}
	last := cs.LastTerminationState.Terminated
	var raw string
	switch {
	case previous:
		if last == nil || last.ContainerID == "" {
			return kubecontainer.ContainerID{}, apierrors.NewBadRequest(fmt.Sprintf("previous terminated container %q in pod %q not found", containerName, podName))
		}
		raw = last.ContainerID
	case cs.State.Running != nil:
		raw = cs.ContainerID
	case cs.State.Terminated != nil && cs.State.Terminated.ContainerID != "":
		raw = cs.State.Terminated.ContainerID
	case last != nil && last.ContainerID != "":
		raw = last.ContainerID
	case cs.State.Terminated != nil || last != nil:
		return kubecontainer.ContainerID{}, apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q is terminated", containerName, podName))
	case cs.State.Waiting != nil:
		return kubecontainer.ContainerID{}, apierrors.NewBadRequest(waitingMessage(podName, containerName, cs.State.Waiting.Reason))
	default:
		return kubecontainer.ContainerID{}, apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q is waiting to start - no logs yet", containerName, podName))
	}
	id, err := kubecontainer.ParseContainerID(raw)
	if err != nil {
		return kubecontainer.ContainerID{}, fmt.Errorf("container %q in pod %q: %w", containerName, podName, err)
	}
	return id, nil
}

// waitingMessage explains why a waiting container has no logs (upstream wording).
func waitingMessage(podName, containerName, reason string) string {
	switch reason {
	case "ErrImagePull":
		return fmt.Sprintf("container %q in pod %q is waiting to start: image can't be pulled", containerName, podName)
	case "ImagePullBackOff":
		return fmt.Sprintf("container %q in pod %q is waiting to start: trying and failing to pull image", containerName, podName)
	}
	return fmt.Sprintf("container %q in pod %q is waiting to start: %s", containerName, podName, reason)
}

// findAnyContainerStatus finds a container's status among the regular, init and ephemeral ones.
func findAnyContainerStatus(st *v1.PodStatus, name string) (v1.ContainerStatus, bool) {
	for _, list := range [][]v1.ContainerStatus{st.ContainerStatuses, st.InitContainerStatuses, st.EphemeralContainerStatuses} {
		for _, cs := range list {
			if cs.Name == name {
				return cs, true
			}
		}
	}
	return v1.ContainerStatus{}, false
}

// GetExec returns the runtime's streaming URL for cmd run in a running container
// of the pod. podUID may be empty; a mirror pod's UID stands for its static pod.
func (k *Kubelet) GetExec(ctx context.Context, namespace, podName string, podUID k8stypes.UID, containerName string, cmd []string, opts remotecommand.Options) (*url.URL, error) {
	id, err := k.findRunningContainer(ctx, namespace, podName, podUID, containerName)
	if err != nil {
		return nil, err
	}
	return k.streaming.GetExec(ctx, id, cmd, opts.Stdin, opts.Stdout, opts.Stderr, opts.TTY)
}

// GetAttach returns the runtime's streaming URL attached to a running
// container's main process. The TTY setting comes from the container's spec:
// it cannot change after the process started.
func (k *Kubelet) GetAttach(ctx context.Context, namespace, podName string, podUID k8stypes.UID, containerName string, opts remotecommand.Options) (*url.URL, error) {
	pod, ok := k.GetPodByName(namespace, podName)
	if !ok || (podUID != "" && pod.UID != k.translateUID(namespace, podName, podUID)) {
		return nil, apierrors.NewNotFound(podsResource, namespace+"/"+podName)
	}
	spec := containerSpec(pod, containerName)
	if spec == nil {
		return nil, containerNotFound(namespace, podName, containerName)
	}
	id, err := k.findRunningContainer(ctx, namespace, podName, podUID, containerName)
	if err != nil {
		return nil, err
	}
	return k.streaming.GetAttach(ctx, id, opts.Stdin, opts.Stdout, opts.Stderr, spec.TTY)
}

// GetPortForward returns the runtime's streaming URL forwarding ports of the
// pod's sandbox. The pod must be running on this node.
func (k *Kubelet) GetPortForward(ctx context.Context, namespace, podName string, podUID k8stypes.UID, opts portforward.V4Options) (*url.URL, error) {
	running, err := k.findRunningPod(ctx, namespace, podName, podUID)
	if err != nil {
		return nil, err
	}
	return k.streaming.GetPortForward(ctx, running.ID, opts.Ports)
}

// RunInContainer runs cmd in a running container and returns its stdout
// followed by its stderr (upstream /run).
func (k *Kubelet) RunInContainer(ctx context.Context, namespace, podName string, podUID k8stypes.UID, containerName string, cmd []string) ([]byte, error) {
	id, err := k.findRunningContainer(ctx, namespace, podName, podUID, containerName)
	if err != nil {
		return nil, err
	}
	return k.streaming.RunInContainer(ctx, id, cmd, 0)
}

// CheckpointContainer checkpoints a running container into
// <root>/checkpoints/checkpoint-<pod>_<namespace>-<container>-<time>.tar and
// sets opts.Location to that file. opts.Timeout is passed on.
func (k *Kubelet) CheckpointContainer(ctx context.Context, namespace, podName string, podUID k8stypes.UID, containerName string, opts *runtimeapi.CheckpointContainerRequest) error {
	id, err := k.findRunningContainer(ctx, namespace, podName, podUID, containerName)
	if err != nil {
		return err
	}
	opts.ContainerId = id.ID
	if opts.Location == "" {
		stamp := strings.ReplaceAll(time.Now().UTC().Format(time.RFC3339), ":", "-")
		opts.Location = filepath.Join(k.helper.CheckpointsDir(),
			fmt.Sprintf("checkpoint-%s_%s-%s-%s.tar", podName, namespace, containerName, stamp))
	}
	return k.streaming.CheckpointContainer(ctx, opts)
}

// findRunningPod finds the pod among those the runtime runs. An empty podUID
// matches any; a mirror pod's UID is translated to its static pod's.
func (k *Kubelet) findRunningPod(ctx context.Context, namespace, podName string, podUID k8stypes.UID) (*kubecontainer.Pod, error) {
	pods, err := k.deps.runtime.GetPods(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("list running pods: %w", err)
	}
	uid := k.translateUID(namespace, podName, podUID)
	for _, p := range pods {
		if p.Namespace == namespace && p.Name == podName && (uid == "" || p.ID == uid) {
			return p, nil
		}
	}
	return nil, apierrors.NewNotFound(podsResource, namespace+"/"+podName)
}

// findRunningContainer finds a running container of a running pod by name.
func (k *Kubelet) findRunningContainer(ctx context.Context, namespace, podName string, podUID k8stypes.UID, containerName string) (kubecontainer.ContainerID, error) {
	pod, err := k.findRunningPod(ctx, namespace, podName, podUID)
	if err != nil {
		return kubecontainer.ContainerID{}, err
	}
	for _, c := range pod.Containers {
		if c.Name == containerName {
			return c.ID, nil
		}
	}
	return kubecontainer.ContainerID{}, containerNotFound(namespace, podName, containerName)
}

// translateUID maps the UID of a static pod's mirror pod to the static pod's.
func (k *Kubelet) translateUID(namespace, podName string, uid k8stypes.UID) k8stypes.UID {
	if uid == "" {
		return uid
	}
	if m, ok := k.pods.Mirror(namespace, podName); ok && m.UID == uid {
		if static, ok := k.pods.ByFullName(namespace, podName); ok {
			return static.UID
		}
	}
	return uid
}

func containerNotFound(namespace, podName, containerName string) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: "containers"},
		fmt.Sprintf("%s (pod %s/%s)", containerName, namespace, podName))
}

// containerSpec finds a container (regular, init or ephemeral) in the pod spec.
func containerSpec(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		}
	}
	return nil
}
