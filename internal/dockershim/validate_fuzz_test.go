package dockershim

import (
	"errors"
	"strings"
	"testing"
	"unicode"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// FuzzValidateRequest: the edge's checks never panic, and what they accept
// cannot steer a Docker API path or a file path: accepted images and IDs hold
// no "." or ".." segments, "?", "#", white space or control characters, and accepted log
// paths stay relative and below their directory.
func FuzzValidateRequest(f *testing.F) {
	for _, seed := range []struct{ image, id, logPath string }{
		{"busybox:1", "abc", "c/0.log"},
		{"registry.k8s.io/pause@sha256:" + strings.Repeat("a", 64), strings.Repeat("f", 64), "0.log"},
		{"../containers/abc", "../x", "../../x.log"},
		{"busy box#x?y", "ABC", "/tmp/x.log"},
		{"sha256:" + strings.Repeat("0", 64), "", "a/../b.log"},
	} {
		f.Add(seed.image, seed.id, seed.logPath)
	}
	f.Fuzz(func(t *testing.T, image, id, logPath string) {
		imgErr := validateRequest(&runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: image}})
		if imgErr == nil && hostile(image) {
			t.Fatalf("image %q accepted", image)
		}
		idErr := validateRequest(&runtimeapi.StopContainerRequest{ContainerId: id})
		if idErr == nil && hostile(id) {
			t.Fatalf("container id %q accepted", id)
		}
		req := &runtimeapi.CreateContainerRequest{PodSandboxId: "abc", SandboxConfig: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{}},
			Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{}, Image: &runtimeapi.ImageSpec{Image: "busybox"}, LogPath: logPath}}
		if err := validateRequest(req); err == nil && (strings.HasPrefix(logPath, "/") || escapes(logPath)) {
			t.Fatalf("log path %q accepted", logPath)
		}
		for _, err := range []error{imgErr, idErr} {
			if err != nil && !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("refusal is not InvalidArgument: %v", err)
			}
		}
	})
}

// hostile reports whether s has a "." or ".." path segment, a query or
// fragment, white space or control characters.
func hostile(s string) bool {
	for _, seg := range strings.Split(s, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return strings.ContainsAny(s, "?#") ||
		strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0
}

// escapes reports whether a relative path climbs above its starting directory.
func escapes(p string) bool {
	depth := 0
	for _, part := range strings.Split(p, "/") {
		switch part {
		case "", ".":
		case "..":
			if depth--; depth < 0 {
				return true
			}
		default:
			depth++
		}
	}
	return false
}
