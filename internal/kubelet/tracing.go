package kubelet

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podworkers"
)

// TracerName is the instrumentation scope of the pod sync spans, upstream's.
const TracerName = "k8s.io/kubernetes/pkg/kubelet"

// tracedSync wraps the pod workers' steps in upstream's spans: syncPod (with
// the update type), syncTerminatingPod and syncTerminatedPod, each with the
// pod's UID, name, namespace and "namespace/name", an error recorded on it.
// The runtime's CRI calls made in a step are its children.
type tracedSync struct {
	inner  podworkers.SyncFuncs
	tracer trace.Tracer
}

var _ podworkers.SyncFuncs = tracedSync{}

func podAttributes(pod *v1.Pod, extra ...attribute.KeyValue) trace.SpanStartOption {
	return trace.WithAttributes(append([]attribute.KeyValue{
		attribute.String("k8s.pod.uid", string(pod.UID)),
		attribute.String("k8s.pod", pod.Namespace+"/"+pod.Name),
		attribute.String("k8s.pod.name", pod.Name),
		attribute.String("k8s.namespace.name", pod.Namespace),
	}, extra...)...)
}

// endSpan records err on the span and ends it.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func (t tracedSync) SyncPod(ctx context.Context, updateType podworkers.UpdateType, pod *v1.Pod, ps *kubecontainer.PodStatus) (bool, error) {
	ctx, span := t.tracer.Start(ctx, "syncPod", podAttributes(pod, attribute.String("k8s.pod.update_type", updateType.String())))
	terminal, err := t.inner.SyncPod(ctx, updateType, pod, ps)
	endSpan(span, err)
	return terminal, err
}

func (t tracedSync) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, ps *kubecontainer.PodStatus, gracePeriod *int64) error {
	ctx, span := t.tracer.Start(ctx, "syncTerminatingPod", podAttributes(pod))
	err := t.inner.SyncTerminatingPod(ctx, pod, ps, gracePeriod)
	endSpan(span, err)
	return err
}

func (t tracedSync) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, ps *kubecontainer.PodStatus) error {
	ctx, span := t.tracer.Start(ctx, "syncTerminatedPod", podAttributes(pod))
	err := t.inner.SyncTerminatedPod(ctx, pod, ps)
	endSpan(span, err)
	return err
}
