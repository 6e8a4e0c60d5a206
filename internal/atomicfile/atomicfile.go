// Package atomicfile replaces a file's content in one step, as the kubelet's
// checkpoints (CPU and memory manager state, device checkpoint, node
// shutdown state) must be written: a reader sees the old content or the new,
// never a part. It imports nothing of this module; any package may use it.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile replaces path's content with data: a temporary file in the same
// directory (created with mode 0600, as upstream's checkpoint store, then
// given perm), written and synced, renamed over path; then the directory is
// synced so that the rename itself survives a crash. The directory must
// exist. On error path is unchanged and the temporary file removed.
func WriteFile(path string, data []byte, perm os.FileMode) (retErr error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if retErr != nil {
			_ = os.Remove(f.Name())
		}
	}()
	werr := f.Chmod(perm)
	if werr == nil {
		_, werr = f.Write(data)
	}
	if werr == nil {
		werr = f.Sync()
	}
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
