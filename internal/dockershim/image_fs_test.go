package dockershim

import (
	"context"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

func TestImageFsInfoCache(t *testing.T) {
	t.Parallel()
	f := &statsFakeDocker{images: []libdocker.ImageSummary{{ID: "sha256:a", Size: 100}, {ID: "sha256:b", Size: 23}}}
	s := statsTestService(t, f)
	now := time.Unix(9000, 0)
	s.stats.now = func() time.Time { return now }
	s.stats.entries["c1"] = &statsEntry{sizeRw: 40, hasSize: true}
	s.stats.entries["c2"] = &statsEntry{sizeRw: 2, hasSize: true}
	ctx := context.Background()
	get := func() *runtimeapi.ImageFsInfoResponse {
		t.Helper()
		resp, err := s.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := get()
	img, ctr := resp.ImageFilesystems[0], resp.ContainerFilesystems[0]
	if img.UsedBytes.Value != 123 || img.FsId.Mountpoint != "/var/lib/docker/overlay2" || img.InodesUsed == nil || img.Timestamp != now.UnixNano() {
		t.Errorf("image filesystem = %v", img)
	}
	if ctr.UsedBytes.Value != 42 || ctr.FsId.Mountpoint != img.FsId.Mountpoint {
		t.Errorf("container filesystem = %v", ctr)
	}
	f.mu.Lock()
	f.images = f.images[:1]
	f.mu.Unlock()
	if got := get().ImageFilesystems[0].UsedBytes.Value; got != 123 {
		t.Errorf("within the TTL: %d, want the cached 123", got)
	}
	now = now.Add(imageFsTTL)
	if got := get().ImageFilesystems[0].UsedBytes.Value; got != 100 {
		t.Errorf("after the TTL: %d, want 100", got)
	}
}
