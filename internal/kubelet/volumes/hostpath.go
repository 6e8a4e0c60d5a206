package volumes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// setUpHostPath checks a hostPath volume: no ".." elements, an absolute path, and the
// type check of spec.hostPath.type. Nothing is created under the pod directory.
func (m *Manager) setUpHostPath(src *v1.HostPathVolumeSource) (VolumeInfo, error) {
	if src.Path == "" {
		return VolumeInfo{}, errors.New("hostPath path is empty")
	}
	if slices.Contains(strings.Split(filepath.ToSlash(src.Path), "/"), "..") {
		return VolumeInfo{}, fmt.Errorf("invalid HostPath `%s`: must not contain '..'", src.Path)
	}
	if !filepath.IsAbs(src.Path) {
		return VolumeInfo{}, fmt.Errorf("invalid HostPath `%s`: must be an absolute path", src.Path)
	}
	typ := v1.HostPathUnset
	if src.Type != nil {
		typ = *src.Type
	}
	if err := checkHostPathType(src.Path, typ); err != nil {
		return VolumeInfo{}, err
	}
	return VolumeInfo{HostPath: src.Path}, nil
}

// checkHostPathType applies the hostPath type rules (upstream's): the *OrCreate types
// create a missing directory (0755, with parents) or empty file (0644, the parent must
// exist); every other type must already exist with the right file type. Symlinks are
// followed. The unset type checks nothing.
func checkHostPathType(path string, typ v1.HostPathType) error {
	switch typ {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate:
		if !exists(path) {
			if err := os.MkdirAll(path, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("hostPath create directory %s: %w", path, err)
			}
		}
		return typeMatches(path, v1.HostPathDirectory, "directory")
	case v1.HostPathDirectory:
		return typeMatches(path, v1.HostPathDirectory, "directory")
	case v1.HostPathFileOrCreate:
		if !exists(path) {
			f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o644)
			if err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("hostPath create file %s: %w", path, err)
			}
			if f != nil {
				_ = f.Close()
			}
		}
		return typeMatches(path, v1.HostPathFile, "file")
	case v1.HostPathFile:
		return typeMatches(path, v1.HostPathFile, "file")
	case v1.HostPathSocket:
		return typeMatches(path, v1.HostPathSocket, "socket file")
	case v1.HostPathCharDev:
		return typeMatches(path, v1.HostPathCharDev, "character device")
	case v1.HostPathBlockDev:
		return typeMatches(path, v1.HostPathBlockDev, "block device")
	}
	return fmt.Errorf("%s is an invalid volume type", typ)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func typeMatches(path string, want v1.HostPathType, desc string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("hostPath %s doesn't exist", path)
	}
	if err != nil {
		return fmt.Errorf("hostPath type check failed, %s is not a %s, unable to determine its type: %w", path, desc, err)
	}
	got, ok := fileType(fi.Mode())
	if !ok {
		return fmt.Errorf("hostPath type check failed: %s is not a %s, it is of an unsupported type %s", path, desc, fi.Mode().Type())
	}
	if got != want {
		return fmt.Errorf("hostPath type check failed: %s is not a %s, it's a %s", path, desc, got)
	}
	return nil
}

// fileType maps a file mode to the hostPath type it satisfies.
func fileType(mode os.FileMode) (v1.HostPathType, bool) {
	switch {
	case mode.IsDir():
		return v1.HostPathDirectory, true
	case mode.IsRegular():
		return v1.HostPathFile, true
	case mode&os.ModeSocket != 0:
		return v1.HostPathSocket, true
	case mode&os.ModeCharDevice != 0:
		return v1.HostPathCharDev, true
	case mode&os.ModeDevice != 0:
		return v1.HostPathBlockDev, true
	}
	return "", false
}
