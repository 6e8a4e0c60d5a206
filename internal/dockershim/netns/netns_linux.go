package netns

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Pin bind-mounts the network namespace of process pid onto the pin file of
// id and returns that file's path. A pin left from an earlier attempt is
// replaced.
func (p *Pins) Pin(id string, pid int) (string, error) {
	path, err := p.path(id)
	if err != nil {
		return "", err
	}
	if pid <= 0 {
		return "", fmt.Errorf("pin netns of sandbox %s: invalid pid %d", id, pid)
	}
	if err := p.Unpin(id); err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return "", fmt.Errorf("pin netns of sandbox %s: %w", id, err)
	}
	_ = f.Close()
	src := "/proc/" + strconv.Itoa(pid) + "/ns/net"
	if err := unix.Mount(src, path, "", unix.MS_BIND, ""); err != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("pin netns of sandbox %s: bind-mount %s: %w", id, src, err)
	}
	return path, nil
}

// Path returns the pin of id if a namespace is mounted on it, else "" (no
// pin, or a pin file whose mount is gone, e.g. after a reboot).
func (p *Pins) Path(id string) string {
	path, err := p.path(id)
	if err != nil {
		return ""
	}
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil || st.Type != unix.NSFS_MAGIC {
		return ""
	}
	return path
}

// Unpin unmounts and removes the pin of id; a missing pin is not an error.
func (p *Pins) Unpin(id string) error {
	path, err := p.path(id)
	if err != nil {
		return err
	}
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unpin netns of sandbox %s: %w", id, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("unpin netns of sandbox %s: %w", id, err)
	}
	return nil
}
