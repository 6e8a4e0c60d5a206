//go:build linux

package dockershim

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/registry"
)

func fixtureImageStatus(t *testing.T, s *Service, ref string) *runtimeapi.Image {
	t.Helper()
	resp, err := s.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("ImageStatus(%s): %v", ref, err)
	}
	return resp.Image
}

func fixtureRemoveImage(s *Service, ref string) error {
	_, err := s.RemoveImage(context.Background(), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	return err
}

// TestIntegrationImages lists, inspects and removes real images: by tag (the image
// stays while another tag remains), by ID from many goroutines at once (all succeed),
// and again when already gone.
func TestIntegrationImages(t *testing.T) {
	fixtureEnsureImage(t)
	s := fixtureService(t)
	ctx := context.Background()
	name := "fixture-img-" + fixtureRand()
	id := fixtureImportImage(t, name+":v1", map[string]string{"etc/unique": name}, "USER 1234:5")
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", id).Run() })
	fixtureDocker(t, "tag", id, name+":v2")

	img := fixtureImageStatus(t, s, name+":v1")
	if img.GetId() != id || img.GetUid().GetValue() != 1234 || !slices.Contains(img.RepoTags, name+":v2") || img.Size == 0 {
		t.Errorf("ImageStatus = %v, want id %s, uid 1234, both tags", img, id)
	}
	if got := fixtureImageStatus(t, s, "docker.io/library/"+name+":v1").GetId(); got != id {
		t.Errorf("ImageStatus(normalised name) id = %q, want %q", got, id)
	}
	if got := fixtureImageStatus(t, s, name+":nope"); got != nil {
		t.Errorf("ImageStatus(unknown tag) = %v, want nil", got)
	}
	list, err := s.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: name + ":v2"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Images) != 1 || list.Images[0].Id != id || list.Images[0].GetUid().GetValue() != 1234 {
		t.Errorf("ListImages(%s:v2) = %v", name, list.Images)
	}

	if err := fixtureRemoveImage(s, name+":v1"); err != nil {
		t.Fatal(err)
	}
	if fixtureImageStatus(t, s, name+":v1") != nil || fixtureImageStatus(t, s, name+":v2").GetId() != id {
		t.Error("removing tag v1 did not keep the image under v2")
	}
	fixtureDocker(t, "tag", id, name+":v1")

	const n = 8
	errs := make([]error, n)
	stillThere := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fixtureRemoveImage(s, id)
			// The CRI wants the image gone as soon as any RemoveImage returns.
			stillThere[i] = fixtureImageStatus(t, s, id) != nil
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent RemoveImage %d: %v", i, err)
		}
		if stillThere[i] {
			t.Errorf("concurrent RemoveImage %d returned while the image still existed", i)
		}
	}
	if got := fixtureImageStatus(t, s, id); got != nil {
		t.Errorf("image still present after RemoveImage by ID: %v", got)
	}
	if err := fixtureRemoveImage(s, id); err != nil {
		t.Errorf("RemoveImage of a removed image: %v", err)
	}

	last := fixtureImportImage(t, name+"-last:v1", map[string]string{"etc/unique": name + "-last"})
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", last).Run() })
	if err := fixtureRemoveImage(s, name+"-last:v1"); err != nil {
		t.Fatal(err)
	}
	if got := fixtureImageStatus(t, s, last); got != nil {
		t.Errorf("removing the last tag left the image: %v", got)
	}
}

// fixtureRegistry runs an htpasswd-protected registry (testutil/registry).
func fixtureRegistry(t *testing.T, user, pass string) string {
	t.Helper()
	return registry.Start(t, user, pass)
}

// TestIntegrationPullImage pulls from a local htpasswd-protected registry: refused
// without credentials, accepted with username/password and with the base64 auth field,
// an untagged reference pulls :latest, and ImageRef is the ID ImageStatus reports.
func TestIntegrationPullImage(t *testing.T) {
	fixtureEnsureImage(t)
	const user, pass = "dockershim-fixture", "s3cret:pw"
	reg := fixtureRegistry(t, user, pass)
	repo := reg + "/fixture/pull-" + fixtureRand()
	id := fixtureImportImage(t, repo+":v1", map[string]string{"etc/unique": repo})
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", id).Run() })
	fixtureDocker(t, "tag", id, repo+":latest")
	cfgDir := t.TempDir() // private docker CLI config: the login stays in the test
	for _, args := range [][]string{{"login", "-u", user, "--password-stdin", reg}, {"push", repo + ":v1"}, {"push", repo + ":latest"}} {
		cmd := exec.Command("docker", args...)
		cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+cfgDir)
		if args[0] == "login" {
			cmd.Stdin = strings.NewReader(pass)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("docker %v: %v: %s", args, err, out)
		}
	}
	fixtureDocker(t, "rmi", repo+":v1", repo+":latest")

	s := fixtureService(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pull := func(ref string, auth *runtimeapi.AuthConfig) (string, error) {
		resp, err := s.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}, Auth: auth})
		return resp.GetImageRef(), err
	}
	if _, err := pull(repo+":v1", nil); err == nil {
		t.Error("pull without credentials succeeded")
	}
	if _, err := pull("", nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("pull of an empty reference: err = %v, want InvalidArgument", err)
	}
	good := &runtimeapi.AuthConfig{Username: user, Password: pass, ServerAddress: reg}
	ref, err := pull(repo+":v1", good)
	if err != nil {
		t.Fatal(err)
	}
	if ref != id || fixtureImageStatus(t, s, repo+":v1").GetId() != id {
		t.Errorf("pull returned %q, want %q (the ID ImageStatus reports)", ref, id)
	}
	if _, err := pull(repo+":nope", good); !errors.Is(err, libdocker.ErrNotFound) {
		t.Errorf("pull of a missing tag: err = %v, want NotFound", err)
	}
	fixtureDocker(t, "rmi", repo+":v1")
	b64 := &runtimeapi.AuthConfig{Auth: base64.StdEncoding.EncodeToString([]byte(user + ":" + pass)), ServerAddress: reg}
	if ref, err = pull(repo, b64); err != nil || ref != id {
		t.Fatalf("untagged pull with the auth field: %q, %v; want %q", ref, err, id)
	}
	if fixtureImageStatus(t, s, repo+":latest").GetId() != id || fixtureImageStatus(t, s, repo+":v1") != nil {
		t.Error("an untagged pull must fetch :latest only")
	}
}
