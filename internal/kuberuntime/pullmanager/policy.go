package pullmanager

import (
	"fmt"
	"strings"

	"github.com/distribution/reference"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Policy says whether a pod must show credentials for an image already on the
// node (imagePullCredentialsVerificationPolicy). pulledByKubelet is whether
// the kubelet pulled the image (a record or an intent of it exists): an image
// without is preloaded.
type Policy func(image string, pulledByKubelet bool) bool

// NewPolicy returns the policy of imagePullCredentialsVerificationPolicy, with
// the allowlist of NeverVerifyAllowlistedImages (preloadedImagesVerificationAllowlist).
//   - NeverVerify: no image is verified;
//   - NeverVerifyPreloadedImages (the default): images the kubelet pulled are;
//   - NeverVerifyAllowlistedImages: images not on the allowlist are, whoever
//     pulled them;
//   - AlwaysVerify: every image is.
func NewPolicy(policy kubeletv1beta1.ImagePullCredentialsVerificationPolicy, allowlist []string) (Policy, error) {
	switch policy {
	case kubeletv1beta1.NeverVerify:
		return func(string, bool) bool { return false }, nil
	case kubeletv1beta1.NeverVerifyPreloadedImages, "":
		return func(_ string, pulledByKubelet bool) bool { return pulledByKubelet }, nil
	case kubeletv1beta1.NeverVerifyAllowlistedImages:
		a, err := newAllowlist(allowlist)
		if err != nil {
			return nil, err
		}
		return func(image string, _ bool) bool { return !a.matches(image) }, nil
	case kubeletv1beta1.AlwaysVerify:
		return func(string, bool) bool { return true }, nil
	}
	return nil, fmt.Errorf("unknown image pull credential verification policy: %v", policy)
}

// allowlist is a parsed preloadedImagesVerificationAllowlist: image names
// (no tag, no digest) and prefixes (patterns ending in "/*").
type allowlist struct {
	names    map[string]bool
	prefixes []string
}

func newAllowlist(patterns []string) (*allowlist, error) {
	a := &allowlist{names: map[string]bool{}}
	for _, p := range patterns {
		norm, prefix, err := allowlistPattern(p)
		if err != nil {
			return nil, err
		}
		if prefix {
			a.prefixes = append(a.prefixes, norm)
		} else {
			a.names[norm] = true
		}
	}
	return a, nil
}

// matches says whether image (tag and digest dropped) is allowlisted.
func (a *allowlist) matches(image string) bool {
	name, err := TrimTagDigest(image)
	if err != nil {
		name = image
	}
	if a.names[name] {
		return true
	}
	for _, p := range a.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// ValidateAllowlist checks preloadedImagesVerificationAllowlist's patterns,
// with upstream's messages.
func ValidateAllowlist(patterns []string) error {
	for _, p := range patterns {
		if _, _, err := allowlistPattern(p); err != nil {
			return err
		}
	}
	return nil
}

// allowlistPattern parses one pattern: an image name without tag or digest,
// or a prefix ending in "/*" (returned without the "*").
func allowlistPattern(pattern string) (norm string, prefix bool, err error) {
	if pattern != strings.TrimSpace(pattern) {
		return "", false, fmt.Errorf("leading/trailing spaces are not allowed: %s", pattern)
	}
	trimmed := pattern
	if strings.HasSuffix(pattern, "/*") {
		prefix = true
		trimmed = strings.TrimSuffix(trimmed, "*")
	}
	switch {
	case trimmed == "":
		return "", false, fmt.Errorf("the supplied pattern is too short: %s", pattern)
	case strings.ContainsRune(trimmed, '*'):
		return "", false, fmt.Errorf("not a valid wildcard pattern, only patterns ending with '/*' are allowed: %s", pattern)
	case prefix && len(trimmed) == 1:
		return "", false, fmt.Errorf("at least registry hostname is required")
	case prefix:
		return trimmed, true, nil
	}
	name, err := TrimTagDigest(trimmed)
	if err != nil {
		return "", false, fmt.Errorf("failed to parse as an image name: %w", err)
	}
	if name != trimmed {
		return "", false, fmt.Errorf("neither tag nor digest is accepted in an image reference: %s", pattern)
	}
	return trimmed, false, nil
}

// TrimTagDigest drops the tag and digest of an image reference as the pod
// wrote it ("busybox:1.36" is "busybox", nothing is qualified): the key of a
// Record's credential mapping.
func TrimTagDigest(image string) (string, error) {
	parsed, err := reference.Parse(image)
	if err != nil {
		return "", err
	}
	if d, ok := parsed.(reference.Digested); ok {
		var found bool
		if image, found = strings.CutSuffix(image, "@"+d.Digest().String()); !found {
			return "", fmt.Errorf("digest was not specified last, this does not appear to be a valid image spec: %q", image)
		}
	}
	if t, ok := parsed.(reference.Tagged); ok {
		var found bool
		if image, found = strings.CutSuffix(image, ":"+t.Tag()); !found {
			return "", fmt.Errorf("tag %q was not specified last (or before the digest), this does not appear to be a valid image spec: %q", t.Tag(), image)
		}
	}
	return image, nil
}
