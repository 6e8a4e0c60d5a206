package kuberuntime

import (
	"reflect"
	"testing"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestPodLabelsAndAnnotations(t *testing.T) {
	t.Parallel()
	pod := testPod("a")
	pod.Labels = map[string]string{"app": "web", podNameLabel: "spoofed"}
	pod.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	labels := newPodLabels(pod)
	want := map[string]string{"app": "web", podNameLabel: "web", podNamespaceLabel: "default", podUIDLabel: "uid-1"}
	if !reflect.DeepEqual(labels, want) {
		t.Errorf("newPodLabels = %v, want %v", labels, want)
	}
	if pod.Labels[podNameLabel] != "spoofed" {
		t.Errorf("newPodLabels changed the pod's labels")
	}
	if got := newPodAnnotations(pod); !reflect.DeepEqual(got, pod.Annotations) {
		t.Errorf("newPodAnnotations = %v, want %v", got, pod.Annotations)
	}
	if got := getLabeledInfo(newContainerLabels(&pod.Spec.Containers[0], pod)); got != (labeledInfo{PodName: "web", PodNamespace: "default", PodUID: "uid-1", ContainerName: "a"}) {
		t.Errorf("container labels round trip = %+v", got)
	}
}

func TestContainerAnnotationsRoundTrip(t *testing.T) {
	t.Parallel()
	preStop := &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/quit", Port: intstr.FromString("http")}}
	ports := []v1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP}}
	tests := []struct {
		desc   string
		mutate func(pod *v1.Pod, c *v1.Container)
		want   func(c *v1.Container) annotatedInfo
	}{
		{
			desc:   "plain container",
			mutate: func(pod *v1.Pod, c *v1.Container) {},
			want: func(c *v1.Container) annotatedInfo {
				return annotatedInfo{Hash: hashContainer(c), RestartCount: 4, PodTerminationGracePeriod: int64p(30),
					TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile}
			},
		},
		{
			desc: "preStop, ports and a deletion grace period",
			mutate: func(pod *v1.Pod, c *v1.Container) {
				c.Lifecycle = &v1.Lifecycle{PreStop: preStop}
				c.Ports = ports
				pod.DeletionGracePeriodSeconds = int64p(9)
				pod.Spec.TerminationGracePeriodSeconds = nil
			},
			want: func(c *v1.Container) annotatedInfo {
				return annotatedInfo{Hash: hashContainer(c), RestartCount: 4, PodDeletionGracePeriod: int64p(9),
					TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile,
					PreStopHandler: preStop, ContainerPorts: ports}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := testPod("a")
			c := &pod.Spec.Containers[0]
			tc.mutate(pod, c)
			got := getAnnotatedInfo(newContainerAnnotations(c, pod, 4), zap.NewNop())
			if want := tc.want(c); !reflect.DeepEqual(got, want) {
				t.Errorf("round trip =\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

func TestGetAnnotatedInfoTolerant(t *testing.T) {
	t.Parallel()
	got := getAnnotatedInfo(map[string]string{
		containerHashAnnotation:             "not-hex",
		containerRestartCountAnnotation:     "x",
		podTerminationGracePeriodAnnotation: "soon",
		containerPreStopHandlerAnnotation:   "{",
		containerPortsAnnotation:            "[",
	}, zap.NewNop())
	if !reflect.DeepEqual(got, annotatedInfo{}) {
		t.Errorf("getAnnotatedInfo of garbage = %+v, want zero values", got)
	}
}
