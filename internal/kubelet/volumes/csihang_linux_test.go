package volumes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes/csi"
)

// hungCSI is a CSI driver whose calls never return until the caller's
// context ends or release is closed (an NFS-backed driver whose server is
// gone).
type hungCSI struct {
	CSIVolumes // block and expansion: not called by these tests
	release    chan struct{}
	setUps     chan k8stypes.UID
}

func (h *hungCSI) hang(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-h.release:
		return nil
	}
}

func (h *hungCSI) SetUp(ctx context.Context, pod *v1.Pod, _ csi.Volume, _ string, _ *int64, _ func(string, *int64) error) (string, error) {
	h.setUps <- pod.UID
	return "", h.hang(ctx)
}

func (h *hungCSI) TearDown(ctx context.Context, dir string, _ func(driver, handle string) bool) error {
	if err := h.hang(ctx); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// within runs fn and fails the test when it does not return within d.
func within(t *testing.T, d time.Duration, what string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(d):
		t.Fatalf("%s: not done within %v (blocked behind the hung driver)", what, d)
	}
}

// TestHungCSIDriverBlocksOnlyItsPod: while one pod's CSI volume hangs in its
// driver (publish), another pod's emptyDir is set up, a third pod's volumes are
// torn down, and the cleanup of an orphan whose CSI teardown hangs returns
// within orphanWait (later cleanups skip it at once); once the driver answers
// the orphan goes.
func TestHungCSIDriverBlocksOnlyItsPod(t *testing.T) {
	t.Parallel()
	hung := &hungCSI{release: make(chan struct{}), setUps: make(chan k8stypes.UID, 1)}
	m, err := New(Options{PodsDir: filepath.Join(t.TempDir(), "pods"), CSI: hung})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer func() {
		select {
		case <-hung.release:
		default:
			close(hung.release)
		}
	}()
	empty := v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}

	stuck := newPod("uid-stuck", v1.Volume{Name: "nfs", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "nfs.example.com"}}})
	go func() { _, _ = m.MountVolumes(ctx, stuck) }()
	if uid := <-hung.setUps; uid != stuck.UID {
		t.Fatalf("the driver was asked for %s", uid)
	}

	within(t, 2*time.Second, "another pod's emptyDir", func() error {
		_, err := m.MountVolumes(ctx, newPod("uid-other", empty))
		return err
	})
	gone := newPod("uid-gone", empty)
	within(t, 2*time.Second, "a third pod's mount", func() error { _, err := m.MountVolumes(ctx, gone); return err })
	within(t, 2*time.Second, "a third pod's teardown", func() error { return m.UnmountVolumes(ctx, gone.UID) })

	// An orphan with a published CSI volume: its teardown hangs.
	orphan := filepath.Join(m.volumesDir("uid-orphan"), csi.PodPluginDir, "pv-1")
	if err := os.MkdirAll(orphan, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(orphan, "vol_data.json"), []byte(`{"driverName":"nfs.example.com","volumeHandle":"h"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	active := map[k8stypes.UID]bool{stuck.UID: true, "uid-other": true}
	within(t, orphanWait+2*time.Second, "housekeeping's cleanup", func() error { return m.CleanupOrphans(ctx, active) })
	start := time.Now()
	within(t, time.Second, "the next cleanup", func() error { return m.CleanupOrphans(ctx, active) })
	if d := time.Since(start); d > orphanWait/2 {
		t.Errorf("the next cleanup waited %v for the orphan it already works on", d)
	}
	if _, err := os.Stat(m.podDir("uid-orphan")); err != nil {
		t.Fatalf("the orphan went while its driver hung: %v", err)
	}

	close(hung.release)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := os.Stat(m.podDir("uid-orphan"))
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the orphan is still there after its driver answered: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
