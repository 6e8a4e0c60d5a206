package kuberuntime

import (
	"encoding/json"
	"strconv"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	kubelettypes "k8s.io/kubelet/pkg/types"
)

// Label and annotation keys, the upstream kubelet's, so existing tools read them.
const (
	podNameLabel       = kubelettypes.KubernetesPodNameLabel       // io.kubernetes.pod.name
	podNamespaceLabel  = kubelettypes.KubernetesPodNamespaceLabel  // io.kubernetes.pod.namespace
	podUIDLabel        = kubelettypes.KubernetesPodUIDLabel        // io.kubernetes.pod.uid
	containerNameLabel = kubelettypes.KubernetesContainerNameLabel // io.kubernetes.container.name

	podDeletionGracePeriodAnnotation          = "io.kubernetes.pod.deletionGracePeriod"
	podTerminationGracePeriodAnnotation       = "io.kubernetes.pod.terminationGracePeriod"
	containerHashAnnotation                   = "io.kubernetes.container.hash"
	containerRestartCountAnnotation           = "io.kubernetes.container.restartCount"
	containerTerminationMessagePathAnnotation = "io.kubernetes.container.terminationMessagePath"
	containerTerminationMessagePolicyAnno     = "io.kubernetes.container.terminationMessagePolicy"
	containerPreStopHandlerAnnotation         = "io.kubernetes.container.preStopHandler"
	containerPortsAnnotation                  = "io.kubernetes.container.ports"
)

// labeledInfo is what the labels of a sandbox or container say.
type labeledInfo struct {
	PodName       string
	PodNamespace  string
	PodUID        k8stypes.UID
	ContainerName string
}

// annotatedInfo is what the annotations of a container say.
type annotatedInfo struct {
	Hash                      uint64
	RestartCount              int
	PodDeletionGracePeriod    *int64
	PodTerminationGracePeriod *int64
	TerminationMessagePath    string
	TerminationMessagePolicy  v1.TerminationMessagePolicy
	PreStopHandler            *v1.LifecycleHandler
	ContainerPorts            []v1.ContainerPort
}

// newPodLabels returns the sandbox labels: the pod's labels plus the pod
// name, namespace and UID.
func newPodLabels(pod *v1.Pod) map[string]string {
	labels := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		labels[k] = v
	}
	labels[podNameLabel] = pod.Name
	labels[podNamespaceLabel] = pod.Namespace
	labels[podUIDLabel] = string(pod.UID)
	return labels
}

// newPodAnnotations returns the sandbox annotations: the pod's annotations.
func newPodAnnotations(pod *v1.Pod) map[string]string {
	annotations := make(map[string]string, len(pod.Annotations))
	for k, v := range pod.Annotations {
		annotations[k] = v
	}
	return annotations
}

// newContainerLabels returns a container's labels: pod name, namespace, UID
// and the container name.
func newContainerLabels(container *v1.Container, pod *v1.Pod) map[string]string {
	return map[string]string{
		podNameLabel:       pod.Name,
		podNamespaceLabel:  pod.Namespace,
		podUIDLabel:        string(pod.UID),
		containerNameLabel: container.Name,
	}
}

// newContainerAnnotations returns a container's annotations: spec hash,
// restart count, termination message settings, grace periods, the preStop
// handler and ports (enough to kill it properly without the pod spec).
func newContainerAnnotations(container *v1.Container, pod *v1.Pod, restartCount int) map[string]string {
	a := map[string]string{
		containerHashAnnotation:                   strconv.FormatUint(hashContainer(container), 16),
		containerRestartCountAnnotation:           strconv.Itoa(restartCount),
		containerTerminationMessagePathAnnotation: container.TerminationMessagePath,
		containerTerminationMessagePolicyAnno:     string(container.TerminationMessagePolicy),
	}
	if pod.DeletionGracePeriodSeconds != nil {
		a[podDeletionGracePeriodAnnotation] = strconv.FormatInt(*pod.DeletionGracePeriodSeconds, 10)
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		a[podTerminationGracePeriodAnnotation] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	if container.Lifecycle != nil && container.Lifecycle.PreStop != nil {
		if data, err := json.Marshal(container.Lifecycle.PreStop); err == nil {
			a[containerPreStopHandlerAnnotation] = string(data)
		}
	}
	if len(container.Ports) > 0 {
		if data, err := json.Marshal(container.Ports); err == nil {
			a[containerPortsAnnotation] = string(data)
		}
	}
	return a
}

// getLabeledInfo reads the pod and container identity from labels.
func getLabeledInfo(labels map[string]string) labeledInfo {
	return labeledInfo{
		PodName:       labels[podNameLabel],
		PodNamespace:  labels[podNamespaceLabel],
		PodUID:        k8stypes.UID(labels[podUIDLabel]),
		ContainerName: labels[containerNameLabel],
	}
}

// getAnnotatedInfo reads a container's annotations; values that do not parse
// are logged and left zero.
func getAnnotatedInfo(annotations map[string]string, logger *zap.Logger) annotatedInfo {
	var info annotatedInfo
	if s, ok := annotations[containerHashAnnotation]; ok {
		h, err := strconv.ParseUint(s, 16, 64)
		if err != nil {
			logger.Debug("bad container hash annotation", zap.String("value", s), zap.Error(err))
		}
		info.Hash = h
	}
	if s, ok := annotations[containerRestartCountAnnotation]; ok {
		n, err := strconv.Atoi(s)
		if err != nil {
			logger.Debug("bad restart count annotation", zap.String("value", s), zap.Error(err))
		}
		info.RestartCount = n
	}
	info.PodDeletionGracePeriod = parseInt64Annotation(annotations, podDeletionGracePeriodAnnotation, logger)
	info.PodTerminationGracePeriod = parseInt64Annotation(annotations, podTerminationGracePeriodAnnotation, logger)
	info.TerminationMessagePath = annotations[containerTerminationMessagePathAnnotation]
	info.TerminationMessagePolicy = v1.TerminationMessagePolicy(annotations[containerTerminationMessagePolicyAnno])
	if s, ok := annotations[containerPreStopHandlerAnnotation]; ok {
		h := &v1.LifecycleHandler{}
		if err := json.Unmarshal([]byte(s), h); err != nil {
			logger.Debug("bad preStop handler annotation", zap.Error(err))
		} else {
			info.PreStopHandler = h
		}
	}
	if s, ok := annotations[containerPortsAnnotation]; ok {
		var ports []v1.ContainerPort
		if err := json.Unmarshal([]byte(s), &ports); err != nil {
			logger.Debug("bad ports annotation", zap.Error(err))
		} else {
			info.ContainerPorts = ports
		}
	}
	return info
}

func parseInt64Annotation(annotations map[string]string, key string, logger *zap.Logger) *int64 {
	s, ok := annotations[key]
	if !ok {
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		logger.Debug("bad integer annotation", zap.String("key", key), zap.String("value", s), zap.Error(err))
		return nil
	}
	return &n
}
