package server

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestMetricsUnary(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	intercept := m.Unary()
	for _, tc := range []struct {
		desc string
		err  error
	}{
		{desc: "ok", err: nil},
		{desc: "not found", err: status.Error(codes.NotFound, "no such sandbox")},
		{desc: "plain error", err: errors.New("boom")},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, got := intercept(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/runtime.v1.RuntimeService/PodSandboxStatus"},
				func(context.Context, any) (any, error) { return nil, tc.err })
			if !errors.Is(got, tc.err) {
				t.Fatalf("error %v, want %v", got, tc.err)
			}
		})
	}
	want := `
# HELP dockershim_operations_total CRI operations served by the dockershim, by operation and gRPC code.
# TYPE dockershim_operations_total counter
dockershim_operations_total{code="NotFound",operation="PodSandboxStatus"} 1
dockershim_operations_total{code="OK",operation="PodSandboxStatus"} 1
dockershim_operations_total{code="Unknown",operation="PodSandboxStatus"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "dockershim_operations_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m.duration); n != 1 {
		t.Fatalf("duration series = %d, want 1", n)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Fatal("registering twice succeeded")
	}
}
