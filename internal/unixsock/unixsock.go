// Package unixsock listens on unix sockets for both halves (the shim's CRI
// socket, the kubelet's root-only local socket): a stale socket file nobody
// answers on is replaced, a live socket or a non-socket file is an error and is
// left untouched, and the socket gets its mode before Listen returns.
package unixsock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// probeTimeout bounds the dial that tells a stale socket from a live one.
const probeTimeout = 2 * time.Second

var (
	// ErrSocketInUse means another process answers on the socket path.
	ErrSocketInUse = errors.New("socket is in use by another process")
	// ErrNotSocket means the socket path exists and is not a socket.
	ErrNotSocket = errors.New("path exists and is not a socket")
)

// Listen removes a stale socket at path, creates its parent directory (with
// dirMode) when missing, listens on path and sets the socket's mode. On error
// nothing it created is left listening.
func Listen(ctx context.Context, path string, mode, dirMode fs.FileMode) (net.Listener, error) {
	if err := removeStaleSocket(ctx, path); err != nil {
		return nil, err
	}
	return listenUnix(path, mode, dirMode)
}

// removeStaleSocket removes path if it is a socket nobody listens on.
// A missing path is fine; a live socket or a non-socket file is an error and
// is left untouched.
func removeStaleSocket(ctx context.Context, path string) error {
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking socket %s: %w", path, err)
	}
	if info.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("socket %s: %w (mode %v); remove it or choose another path", path, ErrNotSocket, info.Mode())
	}
	live, err := socketAnswers(ctx, path)
	if err != nil {
		return err
	}
	if live {
		return fmt.Errorf("socket %s: %w: another process serves it", path, ErrSocketInUse)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing stale socket %s: %w", path, err)
	}
	return nil
}

// socketAnswers dials path. Connection refused means the socket is stale.
func socketAnswers(ctx context.Context, path string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	switch {
	case err == nil:
		_ = conn.Close()
		return true, nil
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("probing socket %s for a live server: %w", path, err)
	}
}

// listenUnix creates the parent directory, listens on path and sets the
// socket's mode.
func listenUnix(path string, mode, dirMode fs.FileMode) (_ net.Listener, retErr error) {
	if err := os.MkdirAll(filepath.Dir(path), dirMode); err != nil {
		return nil, fmt.Errorf("creating socket directory: %w", err)
	}
	// Bound under a temporary name, given its mode, then renamed: the socket
	// never appears at path with the umask's mode.
	tmp := path + ".~"
	_ = os.Remove(tmp) // left by a crash between bind and rename
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	lis.SetUnlinkOnClose(false)
	defer func() {
		if retErr != nil {
			_ = lis.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err := os.Chmod(tmp, mode); err != nil {
		return nil, fmt.Errorf("setting mode of socket %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("placing socket %s: %w", path, err)
	}
	return &listener{UnixListener: lis, path: path}, nil
}

// listener unlinks the socket at its final path when closed (the bound name
// was the temporary one).
type listener struct {
	*net.UnixListener
	path string
	once sync.Once
}

func (l *listener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() { _ = os.Remove(l.path) })
	return err
}
