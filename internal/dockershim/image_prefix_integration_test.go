//go:build linux

package dockershim

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fixtureUniquePrefix returns the length (at least 4) of the shortest prefix
// of the image ID hex that no other local image ID starts with, so that Docker
// resolves the prefix to that image and to no other.
func fixtureUniquePrefix(t *testing.T, hex string) int {
	t.Helper()
	var others []string
	for _, id := range strings.Fields(fixtureDocker(t, "images", "-a", "-q", "--no-trunc")) {
		if h := strings.TrimPrefix(id, "sha256:"); h != hex {
			others = append(others, h)
		}
	}
	for n := 4; n < len(hex); n++ {
		taken := false
		for _, o := range others {
			taken = taken || strings.HasPrefix(o, hex[:n])
		}
		if !taken {
			return n
		}
	}
	t.Fatalf("no unique prefix of %s", hex)
	return 0
}

// fixtureSandbox runs a container the shim takes for a sandbox, and removes it
// and every container created in it when the test ends.
func fixtureSandbox(t *testing.T) string {
	t.Helper()
	sb := fixtureRun(t, "--label", labelType+"="+typeSandbox, "--label", labelManaged+"=true", fixtureImage, "sleep", "600")
	t.Cleanup(func() {
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label="+labelSandboxID+"="+sb).Output()
		for _, id := range strings.Fields(string(out)) {
			_ = exec.Command("docker", "rm", "-f", id).Run()
		}
	})
	return sb
}

// fixtureCreateContainer asks the shim for a container of image ref in sandbox sb.
func fixtureCreateContainer(s *Service, sb, name, ref string) (string, error) {
	resp, err := s.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{
		PodSandboxId: sb,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name},
			Image:    &runtimeapi.ImageSpec{Image: ref},
			Command:  []string{"true"},
		},
		SandboxConfig: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "prefix-" + name, Namespace: "fixture", Uid: name}},
	})
	return resp.GetContainerId(), err
}

// TestIntegrationImageIDPrefixRefused: Docker takes a reference it has no tag
// for as an image ID prefix ("sha256:3f5e", "3f5e"), so a client guessing a few
// hex digits would reach any local image. The shim refuses them, as the 1.23
// dockershim and cri-dockerd did: a prefix is an unknown image for every image
// RPC (no status, not listed, nothing removed) and CreateContainer is NotFound;
// the full ID and the image's tags still name it, and a container is created
// from the ID the shim checked.
func TestIntegrationImageIDPrefixRefused(t *testing.T) {
	fixtureEnsureImage(t)
	s := fixtureService(t)
	ctx := context.Background()
	name := "fixture-prefix-" + fixtureRand()
	id := fixtureImportImage(t, name+":v1", map[string]string{"etc/unique": name})
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", id).Run() })
	hex := strings.TrimPrefix(id, "sha256:")
	n := fixtureUniquePrefix(t, hex)
	prefixes := []string{"sha256:" + hex[:n], hex[:n], hex[:max(n, 12)], "sha256:" + hex[:63], hex[:63]}
	for _, ref := range prefixes {
		// Docker itself resolves each of them to the image.
		if got := fixtureDocker(t, "image", "inspect", "-f", "{{.Id}}", ref); got != id {
			t.Fatalf("docker image inspect %s = %s, want %s", ref, got, id)
		}
	}
	sb := fixtureSandbox(t)

	for i, ref := range prefixes {
		if img := fixtureImageStatus(t, s, ref); img != nil {
			t.Errorf("ImageStatus(%s) = image %s, want none (an ID prefix names no image)", ref, img.Id)
		}
		list, err := s.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: ref}}})
		if err != nil || len(list.GetImages()) != 0 {
			t.Errorf("ListImages(%s) = %v, %v; want no image", ref, list.GetImages(), err)
		}
		cid, err := fixtureCreateContainer(s, sb, "prefix"+string(rune('a'+i)), ref)
		if code := status.Code(ToGRPC(err)); code != codes.NotFound {
			t.Errorf("CreateContainer(image %s) = %q, %v; want NotFound", ref, cid, err)
		}
	}
	if out := fixtureDocker(t, "ps", "-aq", "--filter", "label="+labelSandboxID+"="+sb); out != "" {
		t.Errorf("containers created from ID prefixes: %s", out)
	}

	for _, ref := range []string{id, hex, name + ":v1", "docker.io/library/" + name + ":v1"} {
		if got := fixtureImageStatus(t, s, ref).GetId(); got != id {
			t.Errorf("ImageStatus(%s) id = %q, want %q", ref, got, id)
		}
	}
	cid, err := fixtureCreateContainer(s, sb, "bytag", name+":v1")
	if err != nil {
		t.Fatalf("CreateContainer by tag: %v", err)
	}
	if got := fixtureDocker(t, "inspect", "-f", "{{.Config.Image}}", cid); got != id {
		t.Errorf("container created from image %q, want the checked ID %s", got, id)
	}
	fixtureDocker(t, "rm", "-f", cid)

	for _, ref := range prefixes {
		if err := fixtureRemoveImage(s, ref); err != nil {
			t.Errorf("RemoveImage(%s) = %v, want success (an unknown image)", ref, err)
		}
		out, err := exec.Command("docker", "image", "inspect", "-f", "{{.Id}} {{.RepoTags}}", id).CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != id+" ["+name+":v1]" {
			t.Fatalf("after RemoveImage(%s) the image is %q (%v), want it untouched", ref, got, err)
		}
	}
}
