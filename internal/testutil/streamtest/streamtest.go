// Package streamtest holds helpers for tests of exec, attach and port-forward
// streams: a buffer to wait on and the exit code of a stream's error. It is
// test support: only _test.go files (and other internal/testutil packages)
// may import it. Every helper fails the test on error.
package streamtest

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	utilexec "k8s.io/utils/exec"
)

// ExitStatus maps the error of an exec stream (a runtime's or a client's) to an
// exit code: 0 for nil, the status of a utilexec.ExitError. Any other error
// fails the test.
func ExitStatus(t testing.TB, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var exitErr utilexec.ExitError
	if !errors.As(err, &exitErr) {
		t.Fatalf("stream error %v carries no exit code", err)
	}
	return exitErr.ExitStatus()
}

// Buffer is a goroutine-safe buffer that signals every write.
type Buffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

// NewBuffer returns an empty Buffer.
func NewBuffer() *Buffer { return &Buffer{wrote: make(chan struct{}, 1)} }

// Write appends p and wakes a waiting WaitFor.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	select {
	case b.wrote <- struct{}{}:
	default:
	}
	return n, err
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// WaitFor waits until the buffer contains want; it fails the test after timeout.
func (b *Buffer) WaitFor(t testing.TB, want string, timeout time.Duration) {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for !strings.Contains(b.String(), want) {
		select {
		case <-b.wrote:
		case <-timer.C:
			t.Fatalf("output %q does not contain %q after %s", b.String(), want, timeout)
		}
	}
}
