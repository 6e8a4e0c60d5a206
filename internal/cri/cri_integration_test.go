//go:build linux

package cri

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/shim"
)

// TestIntegrationShimEndpoint starts a shim-only instance of the kubelet binary
// against the real dockerd and talks to it through NewRuntimeService and
// NewImageService: the clients wait for the socket to appear, and Version,
// Status and ListImages answer and are counted.
func TestIntegrationShimEndpoint(t *testing.T) {
	s := kubelet.Start(t, shim.Options{})
	ctx := s.Context()
	opts := Options{Endpoint: s.Endpoint, Timeout: 30 * time.Second, Registerer: prometheus.NewRegistry(), Logger: zaptest.NewLogger(t)}
	rt, err := NewRuntimeService(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	images, err := NewImageService(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = images.Close(context.Background()) })

	v, err := rt.Version(ctx, "v1")
	if err != nil || v.RuntimeName != "docker" || v.RuntimeApiVersion != "v1" {
		t.Fatalf("Version = %v, %v; want runtime docker, API v1", v, err)
	}
	st, err := rt.Status(ctx, false)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	for _, c := range st.GetStatus().GetConditions() {
		if !c.Status {
			t.Errorf("condition %s false: %s %s", c.Type, c.Reason, c.Message)
		}
	}
	imgs, err := images.ListImages(ctx, nil)
	if err != nil {
		t.Fatalf("ListImages: %v", err)
	}
	const pause = "registry.k8s.io/pause:3.10"
	if !slices.ContainsFunc(imgs, func(img *runtimeapi.Image) bool { return slices.Contains(img.RepoTags, pause) }) {
		t.Errorf("ListImages (%d images) lacks %s", len(imgs), pause)
	}

	reg := opts.Registerer.(*prometheus.Registry)
	for opType, want := range map[string]float64{"version": 2, "status": 1, "image_fs_info": 1, "list_images": 1} {
		if got := counter(t, reg, operationsTotalName, op(opType)); got != want {
			t.Errorf("operations{%s} = %v, want %v", opType, got, want)
		}
	}
}
