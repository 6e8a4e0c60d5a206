package csi

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/waitfor"
)

// hungDriver is a CSI node plugin on a real unix socket whose
// NodeGetVolumeStats, and NodePublishVolume of the handle "hung", never
// answer until the call's context ends (an NFS-backed driver whose server
// is gone).
type hungDriver struct {
	csipb.UnimplementedNodeServer
	statsCalls atomic.Int32
}

func (d *hungDriver) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	return &csipb.NodeGetInfoResponse{NodeId: "n1"}, nil
}

func (d *hungDriver) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	cap := func(t csipb.NodeServiceCapability_RPC_Type) *csipb.NodeServiceCapability {
		return &csipb.NodeServiceCapability{Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: t}}}
	}
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: []*csipb.NodeServiceCapability{cap(csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS)}}, nil
}

func (d *hungDriver) NodePublishVolume(ctx context.Context, req *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	if req.GetVolumeId() == "hung" {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &csipb.NodePublishVolumeResponse{}, nil
}

func (d *hungDriver) NodeGetVolumeStats(ctx context.Context, _ *csipb.NodeGetVolumeStatsRequest) (*csipb.NodeGetVolumeStatsResponse, error) {
	d.statsCalls.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// startHungDriver serves a hungDriver and registers it in a standalone
// Registry (no API server) with short timeouts.
func startHungDriver(t *testing.T) (*Registry, *hungDriver) {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "csi.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	d := &hungDriver{}
	srv := grpc.NewServer()
	csipb.RegisterNodeServer(srv, d)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	r, err := NewRegistry(Options{NodeName: "n1", RootDir: filepath.Join(dir, "root")})
	if err != nil {
		t.Fatal(err)
	}
	r.opTimeout, r.statsWait = 3*time.Second, 50*time.Millisecond
	if err := r.RegisterPlugin(context.Background(), "nfs.example.com", sock, []string{"1.0.0"}); err != nil {
		t.Fatal(err)
	}
	return r, d
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestHungDriverStatsLeaveNothingBehind: 100 scrapes (/metrics asks with no
// deadline of its own) of a volume whose driver never answers each return at
// once, the driver is asked once, and goroutines and file descriptors stay
// flat; each scrape used to wait forever and keep a goroutine and a connection.
func TestHungDriverStatsLeaveNothingBehind(t *testing.T) {
	r, d := startHungDriver(t)
	stats := func() error {
		done := make(chan error, 1)
		go func() {
			_, err := r.VolumeStats(context.Background(), "nfs.example.com", "h1", "/var/lib/kubelet/pods/u/volumes/x")
			done <- err
		}()
		select {
		case err := <-done:
			return err
		case <-time.After(2 * time.Second):
			t.Fatal("VolumeStats of a hung driver did not return within 2s")
			return nil
		}
	}
	if err := stats(); !errors.Is(err, ErrStatsPending) {
		t.Fatalf("first scrape: %v, want ErrStatsPending", err)
	}
	// The query's connection is up once the driver holds the call.
	waitfor.Condition(t, func() bool { return d.statsCalls.Load() == 1 })
	goroutines, fds := runtime.NumGoroutine(), openFDs(t)
	for range 100 {
		if err := stats(); !errors.Is(err, ErrStatsPending) {
			t.Fatalf("scrape: %v, want ErrStatsPending", err)
		}
	}
	// Each scrape's goroutine ends once it answered; give them time to.
	for deadline := time.Now().Add(waitfor.Timeout); runtime.NumGoroutine() > goroutines+2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > goroutines+2 {
		t.Errorf("goroutines %d after 100 scrapes, %d before", g, goroutines)
	}
	if f := openFDs(t); f > fds+2 {
		t.Errorf("open fds %d after 100 scrapes, %d before", f, fds)
	}
	if n := d.statsCalls.Load(); n != 1 {
		t.Errorf("the driver was asked %d times, want once while its first query runs", n)
	}
}

// TestHungPublishOnlyBlocksItsVolume: a publish the driver never answers ends
// at the driver timeout, and meanwhile another volume of the same driver is
// published at once.
func TestHungPublishOnlyBlocksItsVolume(t *testing.T) {
	r, _ := startHungDriver(t)
	r.opTimeout = 500 * time.Millisecond
	pod := &v1.Pod{}
	pod.UID = "u1"
	noOwn := func(string, *int64) error { return nil }
	inline := func(handle string) Volume {
		return Volume{SpecName: handle, Driver: "nfs.example.com", VolumeHandle: handle, Ephemeral: true}
	}
	// Inline volumes need a CSIDriver that allows the Ephemeral mode.
	r.client = fake.NewClientset(&storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: "nfs.example.com"},
		Spec:       storagev1.CSIDriverSpec{VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}},
	})
	publish := func(handle string) error {
		_, err := r.SetUp(context.Background(), pod, inline(handle), filepath.Join(t.TempDir(), handle), nil, noOwn)
		return err
	}
	hungDone := make(chan error, 1)
	start := time.Now()
	go func() {
		hungDone <- publish("hung")
	}()
	time.Sleep(50 * time.Millisecond)
	fine := make(chan error, 1)
	go func() { fine <- publish("fine") }()
	select {
	case err := <-fine:
		if err != nil {
			t.Fatalf("the other volume: %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("the other volume waited for the hung one")
	}
	select {
	case err := <-hungDone:
		if status.Code(errors.Unwrap(err)) != codes.DeadlineExceeded {
			t.Errorf("hung publish: %v, want the driver timeout", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("hung publish ended after %v, want about the timeout (500ms)", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the hung publish never ended: no driver timeout")
	}
}
