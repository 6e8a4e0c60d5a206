package container

import (
	v1 "k8s.io/api/core/v1"
)

// Operation is what a PodUpdate does.
type Operation int

const (
	// SET replaces every pod of the source with Pods (a source's full state).
	SET Operation = iota
	// ADD adds pods new to the source.
	ADD
	// UPDATE changes pods the source already had.
	UPDATE
	// REMOVE removes pods from the source.
	REMOVE
)

func (o Operation) String() string {
	switch o {
	case SET:
		return "SET"
	case ADD:
		return "ADD"
	case UPDATE:
		return "UPDATE"
	case REMOVE:
		return "REMOVE"
	}
	return "UNKNOWN"
}

// Pod sources.
const (
	FileSource = "file"
	HTTPSource = "http"
	APISource  = "api"
	AllSource  = "*"
)

// PodUpdate is one message from a pod source.
type PodUpdate struct {
	Pods   []*v1.Pod
	Op     Operation
	Source string
}

// Annotations the kubelet sets on pods it reads from its sources (upstream keys).
const (
	ConfigSourceAnnotationKey    = "kubernetes.io/config.source"
	ConfigMirrorAnnotationKey    = "kubernetes.io/config.mirror"
	ConfigFirstSeenAnnotationKey = "kubernetes.io/config.seen"
	ConfigHashAnnotationKey      = "kubernetes.io/config.hash"
)

// IsStaticPod reports whether a pod came from a file or URL source.
func IsStaticPod(pod *v1.Pod) bool {
	src := pod.Annotations[ConfigSourceAnnotationKey]
	return src == FileSource || src == HTTPSource
}

// systemCriticalPriority is upstream's SystemCriticalPriority: pods at or
// above it are critical.
const systemCriticalPriority int32 = 2000000000

// IsCriticalPod reports whether the kubelet must never evict or preempt the
// pod: a static pod, a mirror pod, or a pod of priority >= 2000000000, as
// upstream's IsCriticalPod.
func IsCriticalPod(pod *v1.Pod) bool {
	if IsStaticPod(pod) {
		return true
	}
	if _, ok := pod.Annotations[ConfigMirrorAnnotationKey]; ok {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority
}
