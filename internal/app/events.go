package app

import (
	"context"

	"google.golang.org/grpc/metadata"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/pleg"
)

// podIdentityEvents asks the runtime for container events that carry the
// pod's identity only: the evented PLEG reads the pod's status itself. The
// built-in shim (and a shim-only instance of this binary) then spares Docker
// three status reads per event; other runtimes ignore the metadata.
type podIdentityEvents struct{ pleg.EventSource }

func (e podIdentityEvents) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, connected func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	ctx = metadata.AppendToOutgoingContext(ctx, dockershim.EventsDetailKey, dockershim.EventsDetailPodIdentity)
	return e.EventSource.GetContainerEvents(ctx, ch, connected)
}
