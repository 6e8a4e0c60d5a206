package streaming

import (
	"io"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
	remotecommand "k8s.io/cri-streaming/pkg/streaming/remotecommand"
)

// Docker's media types for hijacked streams (API >= 1.42 announces them).
const (
	mediaTypeRawStream         = "application/vnd.docker.raw-stream"
	mediaTypeMultiplexedStream = "application/vnd.docker.multiplexed-stream"
)

// isRawStream reports whether resp carries raw output rather than Docker's
// stdout/stderr multiplexing. Docker announces it on newer API versions; otherwise
// the stream is raw exactly when a TTY is attached.
func isRawStream(resp *libdocker.HijackedResponse, tty bool) bool {
	if mt, ok := resp.MediaType(); ok {
		switch mt {
		case mediaTypeRawStream:
			return true
		case mediaTypeMultiplexedStream:
			return false
		}
	}
	return tty
}

// orDiscard returns w, or io.Discard when w is nil.
func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// copyOutput copies the process output from resp until the stream ends. With a raw
// stream everything goes to stdout.
func copyOutput(resp *libdocker.HijackedResponse, tty bool, stdout, stderr io.Writer) error {
	if isRawStream(resp, tty) {
		_, err := io.Copy(orDiscard(stdout), resp.Reader)
		return err
	}
	_, err := libdocker.DemuxStream(orDiscard(stdout), orDiscard(stderr), resp.Reader)
	return err
}

// copyInput copies in to the process's stdin, then (closeStdin) half-closes the
// connection so the process sees EOF. It returns nil when in reached EOF.
func copyInput(resp *libdocker.HijackedResponse, in io.Reader, closeStdin bool) error {
	if _, err := io.Copy(resp.Conn, in); err != nil {
		return err
	}
	if !closeStdin {
		return nil
	}
	return resp.CloseWrite()
}

// resizeLoop applies terminal sizes from sizes until the channel closes or done is
// closed. Failures are reported to onErr and do not stop the loop.
func resizeLoop(done <-chan struct{}, sizes <-chan remotecommand.TerminalSize, resize func(height, width uint) error, onErr func(error)) {
	for {
		select {
		case <-done:
			return
		case size, ok := <-sizes:
			if !ok {
				return
			}
			if size.Height == 0 || size.Width == 0 {
				continue
			}
			if err := resize(uint(size.Height), uint(size.Width)); err != nil {
				onErr(err)
			}
		}
	}
}
