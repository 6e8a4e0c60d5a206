package cri

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// sample returns the sample of metric family name whose labels equal labels,
// or nil.
func sample(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

// counter returns the value of a counter sample (0 when absent).
func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	return sample(t, reg, name, labels).GetCounter().GetValue()
}

// histogram returns the count and sum of a histogram sample (0 when absent).
func histogram(t *testing.T, reg *prometheus.Registry, op string) (uint64, float64) {
	t.Helper()
	h := sample(t, reg, operationsDurationName, map[string]string{"operation_type": op}).GetHistogram()
	return h.GetSampleCount(), h.GetSampleSum()
}

func op(name string) map[string]string { return map[string]string{"operation_type": name} }

// TestClientsAgainstFakeServer checks that calls reach the runtime, errors keep
// their gRPC code, and every RPC (including the validation calls made while
// connecting) is counted under the kubelet's operation names in one shared
// registry.
func TestClientsAgainstFakeServer(t *testing.T) {
	t.Parallel()
	path := socketPath(t)
	serveFake(t, path, fakeRuntime{}, fakeImages{})
	reg := prometheus.NewRegistry()
	opts := Options{Endpoint: "unix://" + path, Timeout: 5 * time.Second, Registerer: reg, Logger: zaptest.NewLogger(t)}
	ctx := context.Background()

	rt, err := NewRuntimeService(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(ctx) })
	images, err := NewImageService(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = images.Close(ctx) })

	if v, err := rt.Version(ctx, "v1"); err != nil || v.RuntimeName != "fake" {
		t.Fatalf("Version = %v, %v", v, err)
	}
	if cs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{}); err != nil || len(cs) != 1 || cs[0].Id != "c1" {
		t.Fatalf("ListContainers = %v, %v", cs, err)
	}
	if _, err := rt.ContainerStatus(ctx, "missing", false); status.Code(err) != codes.NotFound {
		t.Fatalf("ContainerStatus error = %v, want NotFound", err)
	}
	if imgs, err := images.ListImages(ctx, nil); err != nil || len(imgs) != 1 {
		t.Fatalf("ListImages = %v, %v", imgs, err)
	}

	for _, tc := range []struct {
		desc   string
		name   string
		labels map[string]string
		want   float64
	}{
		{desc: "validation and explicit Version", name: operationsTotalName, labels: op("version"), want: 2},
		{desc: "ListContainers", name: operationsTotalName, labels: op("list_containers"), want: 1},
		{desc: "ContainerStatus", name: operationsTotalName, labels: op("container_status"), want: 1},
		{desc: "image validation", name: operationsTotalName, labels: op("image_fs_info"), want: 1},
		{desc: "ListImages", name: operationsTotalName, labels: op("list_images"), want: 1},
		{desc: "NotFound error", name: operationsErrorsName, labels: op("container_status"), want: 1},
		{desc: "no error for a success", name: operationsErrorsName, labels: op("list_containers"), want: 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := counter(t, reg, tc.name, tc.labels); got != tc.want {
				t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
			}
		})
	}
	if n, _ := histogram(t, reg, "list_containers"); n != 1 {
		t.Errorf("duration histogram count for list_containers = %d, want 1", n)
	}
}

// TestPerCallTimeout checks that a call the runtime does not answer fails with
// DeadlineExceeded after Options.Timeout and is recorded with that code, and
// that RunPodSandbox gets twice the timeout.
func TestPerCallTimeout(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	path := socketPath(t)
	budget := make(chan time.Duration, 1)
	serveFake(t, path, fakeRuntime{statusDelay: 10 * time.Second, sandboxBudget: budget}, nil)
	reg := prometheus.NewRegistry()
	ctx := context.Background()
	rt, err := NewRuntimeService(ctx, Options{Endpoint: "unix://" + path, Timeout: timeout, Registerer: reg, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(ctx) })

	start := time.Now()
	_, err = rt.Status(ctx, false)
	elapsed := time.Since(start)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Status error = %v, want DeadlineExceeded", err)
	}
	if elapsed < timeout || elapsed > timeout+3*time.Second {
		t.Errorf("Status failed after %s, want about %s", elapsed, timeout)
	}
	if got := counter(t, reg, operationsErrorsName, op("status")); got != 1 {
		t.Errorf("errors{status} = %v, want 1", got)
	}
	// The RPC's span starts a moment after its deadline was set: its
	// duration may fall short of the timeout by that moment.
	if n, sum := histogram(t, reg, "status"); n != 1 || sum < 0.9*timeout.Seconds() || sum > (timeout+3*time.Second).Seconds() {
		t.Errorf("status duration count %d sum %v, want 1 and about %v", n, sum, timeout.Seconds())
	}

	if id, err := rt.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{}, ""); err != nil || id != "s1" {
		t.Fatalf("RunPodSandbox = %q, %v; want success", id, err)
	}
	// Its deadline is twice the timeout, less the call's transit.
	if got := <-budget; got <= timeout || got > 2*timeout {
		t.Errorf("RunPodSandbox's deadline left it %s, want about %s (twice the timeout)", got, 2*timeout)
	}
	if got := counter(t, reg, operationsTotalName, op("run_podsandbox")); got != 1 {
		t.Errorf("operations{run_podsandbox} = %v, want 1", got)
	}
}

// TestConnectErrors checks that failing to connect or validate returns an
// error naming the endpoint, within the timeout.
func TestConnectErrors(t *testing.T) {
	t.Parallel()
	unimplemented := socketPath(t)
	serveFake(t, unimplemented, &runtimeapi.UnimplementedRuntimeServiceServer{}, &runtimeapi.UnimplementedImageServiceServer{})
	missing := "unix://" + socketPath(t)
	for _, tc := range []struct {
		desc      string
		endpoint  string
		image     bool
		wantIs    error
		wantInErr string
	}{
		{desc: "runtime: nothing listening", endpoint: missing, wantIs: ErrUnreachable, wantInErr: missing},
		{desc: "image: nothing listening", endpoint: missing, image: true, wantIs: ErrUnreachable, wantInErr: missing},
		{desc: "runtime: Version unimplemented", endpoint: "unix://" + unimplemented, wantInErr: unimplemented},
		{desc: "image: ImageFsInfo unimplemented", endpoint: "unix://" + unimplemented, image: true, wantInErr: unimplemented},
		{desc: "unsupported scheme", endpoint: "http://127.0.0.1:1", wantInErr: "http://127.0.0.1:1"},
		{desc: "empty endpoint", endpoint: "", wantInErr: "Endpoint is required"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			const timeout = 400 * time.Millisecond
			opts := Options{Endpoint: tc.endpoint, Timeout: timeout, Registerer: prometheus.NewRegistry(), Logger: zaptest.NewLogger(t)}
			start := time.Now()
			var err error
			if tc.image {
				_, err = NewImageService(context.Background(), opts)
			} else {
				_, err = NewRuntimeService(context.Background(), opts)
			}
			if err == nil {
				t.Fatal("no error")
			}
			t.Logf("error: %v", err)
			if !strings.Contains(err.Error(), tc.wantInErr) {
				t.Errorf("error %q does not contain %q", err, tc.wantInErr)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("error %q is not %v", err, tc.wantIs)
			}
			if elapsed := time.Since(start); elapsed > timeout+time.Second {
				t.Errorf("failed after %s, want within about %s", elapsed, timeout)
			}
		})
	}
}

// TestWaitsForEndpoint checks that a runtime whose socket appears after the
// client starts connecting is used once it is there.
func TestWaitsForEndpoint(t *testing.T) {
	t.Parallel()
	path := socketPath(t)
	type result struct {
		stop func()
		err  error
	}
	started := make(chan result, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		stop, err := startFake(path, fakeRuntime{}, nil)
		started <- result{stop, err}
	}()
	t.Cleanup(func() {
		if r := <-started; r.err == nil {
			r.stop()
		}
	})
	ctx := context.Background()
	rt, err := NewRuntimeService(ctx, Options{Endpoint: "unix://" + path, Timeout: 5 * time.Second, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(ctx) })
	if _, err := rt.Status(ctx, false); err != nil {
		t.Fatalf("Status: %v", err)
	}
}

// TestCancelledContext checks that cancelling ctx stops the wait for the
// endpoint before the timeout.
func TestCancelledContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := NewRuntimeService(ctx, Options{Endpoint: "unix://" + socketPath(t), Timeout: time.Minute})
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("error %v, want ErrUnreachable", err)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("returned after %s, want soon after ctx ended", elapsed)
	}
}

// TestOptionsDefaults checks the validation and defaults of Options.
func TestOptionsDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc        string
		in          Options
		wantErr     bool
		wantTimeout time.Duration
	}{
		{desc: "zero timeout gets the kubelet default", in: Options{Endpoint: "unix:///x.sock"}, wantTimeout: DefaultTimeout},
		{desc: "explicit timeout kept", in: Options{Endpoint: "unix:///x.sock", Timeout: time.Second}, wantTimeout: time.Second},
		{desc: "negative timeout", in: Options{Endpoint: "unix:///x.sock", Timeout: -1}, wantErr: true},
		{desc: "no endpoint", in: Options{}, wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := tc.in.withDefaults()
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err == nil && (got.Timeout != tc.wantTimeout || got.Logger == nil) {
				t.Errorf("got timeout %s logger %v, want %s and a logger", got.Timeout, got.Logger, tc.wantTimeout)
			}
		})
	}
}
