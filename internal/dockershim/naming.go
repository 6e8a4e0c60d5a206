package dockershim

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	// namePrefix starts every Docker name the shim gives (legacy dockershim convention).
	namePrefix = "k8s"
	// sandboxContainerName is the container-name part of sandbox names.
	sandboxContainerName = "POD"
	nameSep              = "_"
)

// dockerNameChars are the characters Docker accepts in a name after the first.
var dockerNameChars = regexp.MustCompile(`^[a-zA-Z0-9_.-]+$`)

// validNamePart checks that a metadata field fits in a Docker name.
func validNamePart(field, v string) error {
	if v == "" {
		return invalidArg(field, "must not be empty")
	}
	if !dockerNameChars.MatchString(v) {
		return invalidArg(field, "%q has characters Docker names do not allow (allowed: a-z A-Z 0-9 _ . -)", v)
	}
	return nil
}

// validateSandboxMetadata checks the fields a sandbox name is built from.
func validateSandboxMetadata(m *runtimeapi.PodSandboxMetadata) error {
	if m == nil {
		return invalidArg("config.metadata", "must be set")
	}
	for _, f := range []struct{ field, v string }{
		{"config.metadata.name", m.Name}, {"config.metadata.namespace", m.Namespace}, {"config.metadata.uid", m.Uid},
	} {
		if err := validNamePart(f.field, f.v); err != nil {
			return err
		}
	}
	return nil
}

// validateContainerMetadata checks the fields a container name is built from.
func validateContainerMetadata(m *runtimeapi.ContainerMetadata) error {
	if m == nil {
		return invalidArg("config.metadata", "must be set")
	}
	return validNamePart("config.metadata.name", m.Name)
}

// sandboxName is k8s_POD_<pod>_<namespace>_<uid>_<attempt>.
func sandboxName(m *runtimeapi.PodSandboxMetadata) string {
	return strings.Join([]string{namePrefix, sandboxContainerName, m.Name, m.Namespace, m.Uid,
		strconv.FormatUint(uint64(m.Attempt), 10)}, nameSep)
}

// containerName is k8s_<container>_<pod>_<namespace>_<uid>_<attempt>.
func containerName(c *runtimeapi.ContainerMetadata, s *runtimeapi.PodSandboxMetadata) string {
	return strings.Join([]string{namePrefix, c.Name, s.Name, s.Namespace, s.Uid,
		strconv.FormatUint(uint64(c.Attempt), 10)}, nameSep)
}

// parsedName is what a legacy Docker name tells, for containers created by other shims
// (no metadata label).
type parsedName struct {
	Container, Pod, Namespace, UID string
	Attempt                        uint32
}

// parseName parses k8s_<container>_<pod>_<namespace>_<uid>_<attempt>, with or without
// the leading "/" Docker puts on names, and with or without the random 7th field
// cri-dockerd and the 1.23 dockershim append when a name is taken.
func parseName(name string) (parsedName, error) {
	parts := strings.Split(strings.TrimPrefix(name, "/"), nameSep)
	if len(parts) != 6 && len(parts) != 7 || parts[0] != namePrefix {
		return parsedName{}, fmt.Errorf("%q is not a k8s_ container name", name)
	}
	attempt, err := strconv.ParseUint(parts[5], 10, 32)
	if err != nil {
		return parsedName{}, fmt.Errorf("%q has a bad attempt: %w", name, err)
	}
	return parsedName{Container: parts[1], Pod: parts[2], Namespace: parts[3], UID: parts[4], Attempt: uint32(attempt)}, nil
}
