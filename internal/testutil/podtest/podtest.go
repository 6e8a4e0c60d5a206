// Package podtest builds the pods the kubelet's unit tests use. Tests only.
package podtest

import (
	"time"

	v1 "k8s.io/api/core/v1"
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
