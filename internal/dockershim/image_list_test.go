package dockershim

import (
	"context"
	"reflect"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

const imageTestID = "sha256:6f98d68ba735f5d724d0fa5695efdaa557d6f277daea81c0e2c096ac1834c78a"

func TestImageParseRef(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ desc, in, want string }{
		{"hub short name", "busybox", "docker.io/library/busybox:latest"},
		{"hub short name with tag", "busybox:1.36", "docker.io/library/busybox:1.36"},
		{"hub user repo", "user/app:v1", "docker.io/user/app:v1"},
		{"hub full", "docker.io/library/busybox:latest", "docker.io/library/busybox:latest"},
		{"index.docker.io", "index.docker.io/library/busybox", "docker.io/library/busybox:latest"},
		{"registry with port", "127.0.0.1:5000/app", "127.0.0.1:5000/app:latest"},
		{"registry with port and tag", "127.0.0.1:5000/team/app:v2", "127.0.0.1:5000/team/app:v2"},
		{"localhost", "localhost/app:v1", "localhost/app:v1"},
		{"dotted registry", "registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"},
		{"digest only", "busybox@sha256:abc", "docker.io/library/busybox@sha256:abc"},
		{"tag and digest", "busybox:1@sha256:abc", "docker.io/library/busybox:1@sha256:abc"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := parseImageRef(tc.in).String(); got != tc.want {
				t.Errorf("parseImageRef(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestImageMatches(t *testing.T) {
	t.Parallel()
	tags := []string{"busybox:latest", "127.0.0.1:5000/app:v1"}
	digests := []string{"busybox@sha256:1111"}
	for _, tc := range []struct {
		desc string
		ref  string
		want bool
	}{
		{"short name means latest", "busybox", true},
		{"normalised hub name", "docker.io/library/busybox:latest", true},
		{"other tag", "busybox:1.36", false},
		{"registry tag", "127.0.0.1:5000/app:v1", true},
		{"registry name without tag", "127.0.0.1:5000/app", false},
		{"digest", "docker.io/library/busybox@sha256:1111", true},
		{"other digest", "busybox@sha256:2222", false},
		{"full ID", imageTestID, true},
		{"bare hex ID", imageTestID[7:], true},
		{"sha256 prefix is not an ID", "sha256:6f98d6", false},
		{"sha256 four-digit prefix is not an ID", "sha256:6f98", false},
		{"sha256 63-digit prefix is not an ID", imageTestID[:70], false},
		{"bare 12-char prefix is not an ID", "6f98d68ba735", false},
		{"bare short prefix is a name", "6f98d6", false},
		{"ID with a tag is not the ID", imageTestID + ":latest", false},
		{"other ID", "sha256:7f98d68ba735", false},
		{"other name", "alpine", false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := imageMatches(tc.ref, imageTestID, tags, digests); got != tc.want {
				t.Errorf("imageMatches(%q) = %v, want %v", tc.ref, got, tc.want)
			}
		})
	}
}

func TestImageParseUser(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		in   string
		want imageUser
	}{
		{"empty", "", imageUser{}},
		{"uid", "1000", imageUser{uid: 1000, hasUID: true}},
		{"root uid", "0", imageUser{uid: 0, hasUID: true}},
		{"uid:gid", "1000:1000", imageUser{uid: 1000, hasUID: true}},
		{"name", "nobody", imageUser{name: "nobody"}},
		{"name:group", "www-data:www-data", imageUser{name: "www-data"}},
		{"group only", ":100", imageUser{}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := parseImageUser(tc.in); got != tc.want {
				t.Errorf("parseImageUser(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestImageCleanRepoTags(t *testing.T) {
	t.Parallel()
	if got := cleanRepoTags([]string{"<none>:<none>", "a:1", ""}); !reflect.DeepEqual(got, []string{"a:1"}) {
		t.Errorf("cleanRepoTags = %v", got)
	}
	if got := cleanRepoDigests([]string{"<none>@<none>"}); len(got) != 0 {
		t.Errorf("cleanRepoDigests = %v", got)
	}
}

// TestImageListUsesUserCache checks that image users are inspected once per image and
// that the filter applies.
func TestImageListUsesUserCache(t *testing.T) {
	t.Parallel()
	f := &statsFakeDocker{images: []libdocker.ImageSummary{
		{ID: imageTestID, RepoTags: []string{"busybox:latest"}, Size: 2000},
		{ID: "sha256:aaaa", RepoTags: []string{"<none>:<none>"}, RepoDigests: []string{"x@sha256:bbbb"}, Size: 5},
	}}
	s := statsTestService(t, f)
	ctx := context.Background()
	for range 3 {
		resp, err := s.ListImages(ctx, &runtimeapi.ListImagesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Images) != 2 || resp.Images[0].Id != imageTestID || resp.Images[0].Size != 2000 ||
			resp.Images[0].Spec.GetImage() != imageTestID || len(resp.Images[1].RepoTags) != 0 {
			t.Fatalf("ListImages = %v", resp.Images)
		}
	}
	if f.imageCalls != 2 {
		t.Errorf("%d image inspects for 3 lists of 2 images, want 2", f.imageCalls)
	}
	resp, err := s.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: "docker.io/library/busybox"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Images) != 1 || resp.Images[0].Id != imageTestID {
		t.Errorf("filtered ListImages = %v, want busybox only", resp.Images)
	}
	f.mu.Lock()
	f.images = f.images[:1]
	f.mu.Unlock()
	if _, err := s.ListImages(ctx, &runtimeapi.ListImagesRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.stats.imageUsers.get("sha256:aaaa"); ok {
		t.Error("user of a removed image is still cached")
	}
}

// TestImagePinnedSandboxImage: the sandbox (pause) image is reported pinned
// by ListImages and ImageStatus, so that the kubelet's image GC keeps it;
// other images are not.
func TestImagePinnedSandboxImage(t *testing.T) {
	t.Parallel()
	f := &statsFakeDocker{images: []libdocker.ImageSummary{
		{ID: imageTestID, RepoTags: []string{"busybox:latest"}, Size: 2000},
		{ID: "sha256:cccc", RepoTags: []string{"registry.k8s.io/pause:3.10"}, Size: 300},
	}}
	s := statsTestService(t, f)
	s.podInfraImage = "registry.k8s.io/pause:3.10"
	resp, err := s.ListImages(context.Background(), &runtimeapi.ListImagesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	pinned := map[string]bool{}
	for _, img := range resp.Images {
		pinned[img.Id] = img.Pinned
	}
	if !pinned["sha256:cccc"] || pinned[imageTestID] {
		t.Errorf("pinned = %v, want the pause image only", pinned)
	}
}
