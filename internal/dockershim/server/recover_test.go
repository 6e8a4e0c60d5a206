package server

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A panic inside one call answers that call Internal, is seen by the
// interceptors of Options (the metrics count it), and the server keeps
// serving.
func TestPanicInACallAnswersInternal(t *testing.T) {
	t.Parallel()
	path := socketPath(t)
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	opts := testOptions(t, path)
	opts.UnaryInterceptors = []grpc.UnaryServerInterceptor{m.Unary()}
	opts.StreamInterceptors = []grpc.StreamServerInterceptor{m.Stream()}
	startServer(t, opts)

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	rt := runtimeapi.NewRuntimeServiceClient(dial(t, path))
	_, err = rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: "abc"})
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("ContainerStatus = %v, want Internal naming the panic", err)
	}
	events, err := rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err == nil {
		_, err = events.Recv()
	}
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "stream boom") {
		t.Fatalf("GetContainerEvents = %v, want Internal naming the panic", err)
	}
	mustVersion(t, path)
	if n := testutil.ToFloat64(m.total.WithLabelValues("ContainerStatus", "Internal")); n != 1 {
		t.Errorf("dockershim_operations_total{operation=ContainerStatus,code=Internal} = %v, want 1", n)
	}
}
