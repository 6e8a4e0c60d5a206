package volumes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/kubelet-dockershim/kubelet/internal/procfs"
)

// testAllocatable keeps tests independent of the machine.
var testAllocatable = v1.ResourceList{
	v1.ResourceCPU:              resource.MustParse("4"),
	v1.ResourceMemory:           resource.MustParse("8Gi"),
	v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
}

// newTestManager returns a Manager on a fresh PodsDir. Whatever a test leaves mounted
// under it is detached before the temp dir is removed.
func newTestManager(t *testing.T) *Manager {
	t.Helper()
	root := t.TempDir()
	t.Cleanup(func() { detachAll(t, root) })
	m, err := New(Options{PodsDir: filepath.Join(root, "pods"), Allocatable: fixedAllocatable(testAllocatable), Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

func detachAll(t *testing.T, root string) {
	t.Helper()
	mps, err := mountPointsUnder(root)
	if err != nil {
		t.Errorf("list mounts under %s: %v", root, err)
		return
	}
	for _, mp := range mps {
		t.Errorf("left mounted after the test: %s", mp)
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil {
			t.Errorf("detach %s: %v", mp, err)
		}
	}
}

// mustMountPoints is mountPointsUnder(dir); an error fails the test.
func mustMountPoints(t testing.TB, dir string) []string {
	t.Helper()
	mps, err := mountPointsUnder(dir)
	if err != nil {
		t.Fatalf("list mounts under %s: %v", dir, err)
	}
	return mps
}

// mustFSType is mountFSType(dir); an error fails the test.
func mustFSType(t testing.TB, dir string) string {
	t.Helper()
	fs, err := mountFSType(dir)
	if err != nil {
		t.Fatalf("file system type of %s: %v", dir, err)
	}
	return fs
}

func newPod(uid string, vols ...v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: k8stypes.UID(uid)},
		Spec: v1.PodSpec{
			Volumes:    vols,
			Containers: []v1.Container{{Name: "app", Image: "busybox"}},
		},
	}
}

// mountSuperOptions returns the super options of the mount at path ("" when not mounted).
func mountSuperOptions(t *testing.T, path string) string {
	t.Helper()
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(mountInfoPath)
	if err != nil {
		t.Fatal(err)
	}
	opts := ""
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 10 || procfs.UnescapeMountinfo(fields[4]) != real {
			continue
		}
		opts = fields[len(fields)-1]
	}
	return opts
}
