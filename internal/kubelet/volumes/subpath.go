package volumes

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// subPathsDirName is the directory under a pod's directory holding the bind
// mounts of its volumeMounts' subPaths (upstream's containerSubPathDirectoryName).
const subPathsDirName = "volume-subpaths"

// ErrSubPathEscapes is returned (wrapped) when a volumeMount's subPath leads
// outside its volume: through ".." above the volume root, or a symbolic link
// that is absolute or climbs above it.
var ErrSubPathEscapes = errors.New("subPath escapes the volume")

// SubPath names one volumeMount's subPath. BindSubPath pins it with a bind
// mount at <PodDir>/volume-subpaths/<VolumeName>/<ContainerName>/<MountIndex>,
// upstream's layout.
type SubPath struct {
	// VolumePath is the volume's root on the host (VolumeInfo.HostPath).
	VolumePath string
	// Path is the subPath, relative to VolumePath, without "..".
	Path string
	// PodDir is <root-dir>/pods/<uid>.
	PodDir string
	// VolumeName and ContainerName are DNS labels (the API's rule), so they are
	// safe single directory names.
	VolumeName    string
	ContainerName string
	// MountIndex is the index of the volumeMount in the container's list.
	MountIndex int
}

// target is where the subPath is bind-mounted.
func (sp SubPath) target() string {
	return filepath.Join(sp.PodDir, subPathsDirName, sp.VolumeName, sp.ContainerName, strconv.Itoa(sp.MountIndex))
}

// components checks sp and returns the subPath's components, "" and "."
// dropped (none: the volume root itself).
func (sp SubPath) components() ([]string, error) {
	if !filepath.IsAbs(sp.VolumePath) || !filepath.IsAbs(sp.PodDir) {
		return nil, fmt.Errorf("subPath %q: volume path %q and pod directory %q must be absolute", sp.Path, sp.VolumePath, sp.PodDir)
	}
	for what, name := range map[string]string{"volume": sp.VolumeName, "container": sp.ContainerName} {
		if msgs := validation.IsDNS1123Label(name); len(msgs) != 0 {
			return nil, fmt.Errorf("subPath %q: invalid %s name %q: %s", sp.Path, what, name, strings.Join(msgs, "; "))
		}
	}
	if sp.MountIndex < 0 {
		return nil, fmt.Errorf("subPath %q: negative volumeMount index %d", sp.Path, sp.MountIndex)
	}
	if filepath.IsAbs(sp.Path) {
		return nil, fmt.Errorf("subPath %q must not be an absolute path", sp.Path)
	}
	var comps []string
	for _, c := range strings.Split(sp.Path, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			return nil, fmt.Errorf("subPath %q must not contain '..'", sp.Path)
		}
		comps = append(comps, c)
	}
	return comps, nil
}

func (m *Manager) subPathsDir(uid k8stypes.UID) string {
	return filepath.Join(m.podDir(uid), subPathsDirName)
}
