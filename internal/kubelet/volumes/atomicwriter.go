package volumes

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Names the atomic writer reserves in its target directory.
const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
	// tsDirLayout names the timestamped data directories; os.MkdirTemp appends a
	// random suffix, giving e.g. "..2024_01_01_00_00_00.123456789".
	tsDirLayout       = "..2006_01_02_15_04_05."
	maxFileNameLength = 255
	maxPathLength     = 4096
)

// fileProjection is one file of a payload.
type fileProjection struct {
	Data []byte
	Mode int32
}

// atomicWriter projects a set of files into a directory so that readers never see a
// partial update. The real files live in a hidden timestamped directory; "..data" is a
// symlink to it, and every user-visible top-level name is a symlink into "..data".
// An update writes a new timestamped directory and renames a fresh symlink over
// "..data" (rename is atomic), then removes the old directory:
//
//	<dir>/name   -> ..data/name
//	<dir>/sub    -> ..data/sub
//	<dir>/..data -> ..2024_01_01_00_00_00.123456789
//
// Names starting with ".." are reserved. The writer is not safe for concurrent use on
// the same directory (the Manager serialises).
type atomicWriter struct {
	dir    string
	logger *zap.Logger
	// modeExtra are permission bits setPerms adds to every file (the fsGroup bits);
	// they are expected when comparing modes with the current content.
	modeExtra os.FileMode
}

// Write projects payload into the directory, which must exist. setPerms, if set, runs
// on the new timestamped directory before it becomes visible. It does nothing when
// the current content and modes already match and no file is to be removed.
//
// Steps: (1) validate and clean the paths; (2) read the current "..data" target;
// (3) find visible names that disappear; (4) skip if nothing changed; (5) write a new
// timestamped directory; (6) run setPerms; (7) create missing visible symlinks;
// (8) point "..data_tmp" at the new directory and rename it over "..data";
// (9) remove vanished visible names; (10) remove the old and any stale directories.
func (w *atomicWriter) Write(payload map[string]fileProjection, setPerms func(tsDir string) error) error {
	clean, err := validatePayload(payload) // (1)
	if err != nil {
		return err
	}
	dataDir := filepath.Join(w.dir, dataDirName)
	oldTs, err := os.Readlink(dataDir) // (2)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", dataDir, err)
	}
	var toRemove []string
	if oldTs != "" {
		oldTsPath := filepath.Join(w.dir, oldTs)
		if toRemove, err = visibleNamesToRemove(clean, oldTsPath); err != nil { // (3)
			return err
		}
		changed, err := payloadChanged(clean, oldTsPath, w.modeExtra) // (4)
		if err != nil {
			return err
		}
		if !changed && len(toRemove) == 0 {
			return nil
		}
	}
	tsDir, err := w.writeTsDir(clean, setPerms) // (5), (6)
	if err != nil {
		return err
	}
	tsName := filepath.Base(tsDir)
	if err := w.swap(clean, tsName); err != nil { // (7), (8)
		_ = os.RemoveAll(tsDir)
		return err
	}
	w.logger.Debug("Updated volume data", zap.String("dir", w.dir), zap.String("data", tsName))
	for _, name := range toRemove { // (9)
		if err := os.Remove(filepath.Join(w.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove old visible path %s: %w", name, err)
		}
	}
	return w.removeStaleTsDirs(tsName) // (10)
}

// writeTsDir writes the payload into a new timestamped directory (0755) with exact
// file modes, then applies setPerms. The directory is removed on failure.
func (w *atomicWriter) writeTsDir(payload map[string]fileProjection, setPerms func(string) error) (dir string, retErr error) {
	tsDir, err := os.MkdirTemp(w.dir, time.Now().UTC().Format(tsDirLayout))
	if err != nil {
		return "", fmt.Errorf("create data directory in %s: %w", w.dir, err)
	}
	defer func() {
		if retErr != nil {
			_ = os.RemoveAll(tsDir)
		}
	}()
	if err := os.Chmod(tsDir, 0o755); err != nil {
		return "", fmt.Errorf("chmod %s: %w", tsDir, err)
	}
	for rel, fp := range payload {
		full := filepath.Join(tsDir, rel)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", fmt.Errorf("create %s: %w", filepath.Dir(full), err)
		}
		mode := os.FileMode(fp.Mode) & os.ModePerm
		if err := os.WriteFile(full, fp.Data, mode); err != nil {
			return "", fmt.Errorf("write %s: %w", full, err)
		}
		// WriteFile's mode is filtered by the umask; set it exactly.
		if err := os.Chmod(full, mode); err != nil {
			return "", fmt.Errorf("chmod %s: %w", full, err)
		}
	}
	if setPerms != nil {
		if err := setPerms(tsDir); err != nil {
			return "", err
		}
	}
	return tsDir, nil
}

// swap creates the visible symlinks that are missing and atomically points "..data"
// at tsName.
func (w *atomicWriter) swap(payload map[string]fileProjection, tsName string) error {
	for rel := range payload {
		top, _, _ := strings.Cut(rel, string(os.PathSeparator))
		visible := filepath.Join(w.dir, top)
		if _, err := os.Lstat(visible); err == nil {
			continue
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("stat %s: %w", visible, err)
		}
		if err := os.Symlink(filepath.Join(dataDirName, top), visible); err != nil {
			return fmt.Errorf("create visible symlink %s: %w", visible, err)
		}
	}
	tmpLink := filepath.Join(w.dir, newDataDirName)
	if err := os.Remove(tmpLink); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale %s: %w", tmpLink, err)
	}
	if err := os.Symlink(tsName, tmpLink); err != nil {
		return fmt.Errorf("create %s: %w", tmpLink, err)
	}
	if err := os.Rename(tmpLink, filepath.Join(w.dir, dataDirName)); err != nil {
		_ = os.Remove(tmpLink)
		return fmt.Errorf("switch %s to %s: %w", dataDirName, tsName, err)
	}
	return nil
}

// removeStaleTsDirs removes every timestamped directory except current (the previous
// one and any left behind by a crash).
func (w *atomicWriter) removeStaleTsDirs(current string) error {
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", w.dir, err)
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || name == current || !isTsDirName(name) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(w.dir, name)); err != nil {
			errs = append(errs, fmt.Errorf("remove old data directory %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func isTsDirName(name string) bool {
	return strings.HasPrefix(name, "..") && name != dataDirName && name != newDataDirName &&
		len(name) > 3 && name[2] >= '0' && name[2] <= '9'
}

// validatePayload checks every path and returns the payload keyed by cleaned paths.
func validatePayload(payload map[string]fileProjection) (map[string]fileProjection, error) {
	clean := make(map[string]fileProjection, len(payload))
	for p, fp := range payload {
		if err := validatePath(p); err != nil {
			return nil, err
		}
		clean[filepath.Clean(p)] = fp
	}
	return clean, nil
}

// validatePath rejects empty, absolute and too long paths, ".." elements, over-long
// file names, and a first element starting with "..".
func validatePath(p string) error {
	switch {
	case p == "":
		return errors.New("invalid path: must not be empty")
	case filepath.IsAbs(p):
		return fmt.Errorf("invalid path: must be relative path: %s", p)
	case len(p) > maxPathLength:
		return fmt.Errorf("invalid path: must be less than or equal to %d characters", maxPathLength)
	}
	items := strings.Split(p, string(os.PathSeparator))
	for _, item := range items {
		if item == ".." {
			return fmt.Errorf("invalid path: must not contain '..': %s", p)
		}
		if len(item) > maxFileNameLength {
			return fmt.Errorf("invalid path: filenames must be less than or equal to %d characters", maxFileNameLength)
		}
	}
	if strings.HasPrefix(items[0], "..") {
		return fmt.Errorf("invalid path: must not start with '..': %s", p)
	}
	return nil
}

// payloadChanged reports whether any file's content or mode differs from oldTsDir.
func payloadChanged(payload map[string]fileProjection, oldTsDir string, modeExtra os.FileMode) (bool, error) {
	for rel, fp := range payload {
		full := filepath.Join(oldTsDir, rel)
		fi, err := os.Lstat(full)
		if errors.Is(err, os.ErrNotExist) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("stat %s: %w", full, err)
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm() != (os.FileMode(fp.Mode)|modeExtra)&os.ModePerm {
			return true, nil
		}
		old, err := os.ReadFile(full)
		if err != nil {
			return false, fmt.Errorf("read %s: %w", full, err)
		}
		if !bytes.Equal(old, fp.Data) {
			return true, nil
		}
	}
	return false, nil
}

// visibleNamesToRemove returns the top-level names present in oldTsDir that no path
// of the new payload uses.
func visibleNamesToRemove(payload map[string]fileProjection, oldTsDir string) ([]string, error) {
	keep := map[string]bool{}
	for rel := range payload {
		top, _, _ := strings.Cut(rel, string(os.PathSeparator))
		keep[top] = true
	}
	entries, err := os.ReadDir(oldTsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", oldTsDir, err)
	}
	var out []string
	for _, e := range entries {
		if !keep[e.Name()] {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
