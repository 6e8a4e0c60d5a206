package app

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/app/options"
	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm"
)

// runtimeConfigOnly answers RuntimeConfig with the next of answers (the other
// RuntimeService methods are not called).
type runtimeConfigOnly struct {
	internalapi.RuntimeService
	answers []func() (*runtimeapi.RuntimeConfigResponse, error)
	calls   int
}

func (r *runtimeConfigOnly) RuntimeConfig(context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
	a := r.answers[min(r.calls, len(r.answers)-1)]
	r.calls++
	return a()
}

func driverAnswer(d runtimeapi.CgroupDriver) func() (*runtimeapi.RuntimeConfigResponse, error) {
	return func() (*runtimeapi.RuntimeConfigResponse, error) {
		return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: d}}, nil
	}
}

// TestCheckCgroupDriver: the runtime's driver replaces the configured one
// (KubeletCgroupDriverFromCRI), a runtime without RuntimeConfig or without
// its Linux part leaves it, a transient error is retried, an unknown driver
// and one this node cannot use (systemd here, which runs no systemd) are
// errors naming both.
func TestCheckCgroupDriver(t *testing.T) {
	t.Parallel()
	unimplemented := func() (*runtimeapi.RuntimeConfigResponse, error) {
		return nil, status.Error(codes.Unimplemented, "no")
	}
	transient := func() (*runtimeapi.RuntimeConfigResponse, error) {
		return nil, status.Error(codes.Unavailable, "starting")
	}
	noLinux := func() (*runtimeapi.RuntimeConfigResponse, error) { return &runtimeapi.RuntimeConfigResponse{}, nil }
	for _, tc := range []struct {
		desc       string
		configured string
		answers    []func() (*runtimeapi.RuntimeConfigResponse, error)
		want       string // the driver afterwards
		wantErr    string
	}{
		{desc: "the runtime's driver wins", configured: "systemd", answers: []func() (*runtimeapi.RuntimeConfigResponse, error){driverAnswer(runtimeapi.CgroupDriver_CGROUPFS)}, want: "cgroupfs"},
		{desc: "unimplemented keeps the configuration", configured: "cgroupfs", answers: []func() (*runtimeapi.RuntimeConfigResponse, error){unimplemented}, want: "cgroupfs"},
		{desc: "no Linux part keeps the configuration", configured: "cgroupfs", answers: []func() (*runtimeapi.RuntimeConfigResponse, error){noLinux}, want: "cgroupfs"},
		{desc: "a transient error is retried", configured: "systemd", answers: []func() (*runtimeapi.RuntimeConfigResponse, error){transient, driverAnswer(runtimeapi.CgroupDriver_CGROUPFS)}, want: "cgroupfs"},
		{desc: "an unknown driver", configured: "cgroupfs", answers: []func() (*runtimeapi.RuntimeConfigResponse, error){driverAnswer(runtimeapi.CgroupDriver(7))}, wantErr: "unknown cgroup driver 7"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			cfg := &Config{Config: options.DefaultConfig()}
			cfg.Kubelet.CgroupDriver = tc.configured
			err := checkCgroupDriver(context.Background(), cfg, &runtimeConfigOnly{answers: tc.answers}, zaptest.NewLogger(t))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || cfg.Kubelet.CgroupDriver != tc.want {
				t.Fatalf("driver %q, err %v; want %q", cfg.Kubelet.CgroupDriver, err, tc.want)
			}
		})
	}
	t.Run("a driver this node cannot use", func(t *testing.T) {
		t.Parallel()
		cfg := &Config{Config: options.DefaultConfig()}
		cfg.Kubelet.CgroupDriver = "cgroupfs"
		err := checkCgroupDriver(context.Background(), cfg, &runtimeConfigOnly{answers: []func() (*runtimeapi.RuntimeConfigResponse, error){driverAnswer(runtimeapi.CgroupDriver_SYSTEMD)}}, zaptest.NewLogger(t))
		if cm.DriverUsable(cgroups.Systemd) == nil { // a systemd host
			if err != nil || cfg.Kubelet.CgroupDriver != "systemd" {
				t.Fatalf("on a systemd host: driver %q, err %v", cfg.Kubelet.CgroupDriver, err)
			}
			return
		}
		if err == nil || !strings.Contains(err.Error(), "uses the systemd cgroup driver (the kubelet's configuration says cgroupfs)") {
			t.Fatalf("err = %v, want one naming both drivers", err)
		}
	})
}
