// Package podtest builds the pods the kubelet's unit tests use. Tests only.
package podtest

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
)

// StaticPod is a static pod (file source) named name in the default
// namespace, bound to node-1, restart policy Always, with one container "c"
// of image busybox; mods change it.
func StaticPod(name, uid string, mods ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", UID: k8stypes.UID(uid),
			// The keys of internal/kubelet/container (config.source: file).
			Annotations:       map[string]string{"kubernetes.io/config.source": "file"},
			CreationTimestamp: metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)),
		},
		Spec: v1.PodSpec{
			NodeName:      "node-1",
			RestartPolicy: v1.RestartPolicyAlways,
			Containers:    []v1.Container{{Name: "c", Image: "busybox"}},
		},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

// Ptr returns a pointer to v.
func Ptr[T any](v T) *T { return &v }

// MarkProbed sets what a prober with every probe passing would: running
// containers started and ready, init containers that exited 0 ready.
func MarkProbed(st *v1.PodStatus) {
	for i := range st.ContainerStatuses {
		c := &st.ContainerStatuses[i]
		running := c.State.Running != nil
		c.Started, c.Ready = &running, running
	}
	for i := range st.InitContainerStatuses {
		c := &st.InitContainerStatuses[i]
		c.Ready = c.State.Terminated != nil && c.State.Terminated.ExitCode == 0
	}
}

// Resources builds requirements from resource name -> quantity maps, e.g.
// {cpu: "100m", memory: "64Mi"}; a nil map stays unset.
func Resources(requests, limits map[v1.ResourceName]string) v1.ResourceRequirements {
	conv := func(in map[v1.ResourceName]string) v1.ResourceList {
		if in == nil {
			return nil
		}
		out := v1.ResourceList{}
		for k, v := range in {
			out[k] = resource.MustParse(v)
		}
		return out
	}
	return v1.ResourceRequirements{Requests: conv(requests), Limits: conv(limits)}
}

// WithContainers is a pod "p" in namespace "ns" with one container per
// requirements, named a, b, ...
func WithContainers(reqs ...v1.ResourceRequirements) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	for i, r := range reqs {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: string(rune('a' + i)), Resources: r})
	}
	return pod
}

// UIDs returns the pods' UIDs, sorted.
func UIDs(pods []*v1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, string(p.UID))
	}
	slices.Sort(out)
	return out
}
