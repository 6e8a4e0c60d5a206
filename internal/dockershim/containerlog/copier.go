package containerlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// errWrite marks a failure to write the log file (as opposed to a broken
// stream), a full disk most often: Docker keeps the output, so the copier
// repairs the file and copies again from the last entry written, with
// back-off, for as long as the container runs.
var errWrite = errors.New("write log file")

// sourceError is a failure of the Source call itself (as opposed to the stream).
type sourceError struct{ err error }

func (e *sourceError) Error() string { return e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// retryPolicy bounds the retries after a broken stream.
type retryPolicy struct {
	max        int // attempts in a row without progress
	backoff    time.Duration
	maxBackoff time.Duration
}

// copier copies one container's Docker log stream into one CRI log file.
type copier struct {
	id     string
	loc    logLocation // the log path, split at the log root
	tty    bool
	src    Source
	log    *zap.Logger
	policy retryPolicy
	cancel context.CancelFunc
	done   chan struct{} // closed when run has returned

	mu   sync.Mutex // serializes writes, reopen and close
	f    *os.File
	w    *Writer
	last time.Time // timestamp of the last entry written or found in the file
}

// run opens the file and copies the stream until the container has exited (then
// catches up), ctx cancellation, a failed first Source call, the container's
// removal, or too many retries of a broken stream while the container runs. A
// file that cannot be written (ENOSPC) is retried without a budget.
//
// Docker's follow stream also ends, with EOF or an error, when the daemon stops: with
// live-restore the container keeps running and its output keeps coming after the
// daemon is back. So the end of a stream is not taken as the end of the container:
// the copier asks Docker for the container's state, waiting for as long as the daemon
// does not answer, and follows again (after the last line copied) while it runs.
func (c *copier) run(ctx context.Context) {
	if err := c.open(); err != nil {
		c.log.Error("open container log file", zap.Error(err))
		return
	}
	defer c.close()
	backoff := c.policy.backoff
	failures := 0
	for first := true; ; first = false {
		before := c.lastWritten()
		err := c.copyOnce(ctx, before, true)
		var srcErr *sourceError
		writeErr := errors.Is(err, errWrite)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, libdocker.ErrNotFound), first && errors.As(err, &srcErr):
			c.log.Error("container log copier stopped", zap.Error(err))
			return
		case writeErr:
			c.repair()
		}
		running, serr := c.waitState(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case serr != nil:
			c.log.Error("container log copier stopped", zap.NamedError("stream", err), zap.Error(serr))
			return
		case !running:
			c.catchUp(ctx)
			return
		}
		if c.lastWritten().After(before) {
			failures, backoff = 0, c.policy.backoff // progress: a fresh budget
		}
		if writeErr {
			c.log.Warn("cannot write the container log; copying again from the last entry written",
				zap.Duration("backoff", backoff), zap.Error(err))
		} else {
			failures++
			if failures > c.policy.max {
				c.log.Error("container log copier gave up", zap.Int("attempts", failures), zap.Error(err))
				return
			}
			c.log.Warn("container log stream ended while the container runs; resuming", zap.Duration("backoff", backoff), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, c.policy.maxBackoff)
	}
}

// waitState reports whether the container runs. While Docker does not answer (it is
// restarting) it retries with backoff until ctx ends; a removed container is an error.
func (c *copier) waitState(ctx context.Context) (running bool, err error) {
	backoff := c.policy.backoff
	for attempt := 1; ; attempt++ {
		j, err := c.src.InspectContainer(ctx, c.id)
		switch {
		case err == nil:
			return j.State != nil && j.State.Running, nil
		case errors.Is(err, libdocker.ErrNotFound):
			return false, err
		case ctx.Err() != nil:
			return false, ctx.Err()
		}
		if attempt == 1 || attempt%20 == 0 {
			c.log.Info("docker does not answer; waiting for it to resume the container log",
				zap.Int("attempt", attempt), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, c.policy.maxBackoff)
	}
}

// catchUp reads, without following, what Docker wrote after the last entry copied.
// Docker's follow stream can end (the container exited) before the container's last
// message, an unterminated line, reaches it.
func (c *copier) catchUp(ctx context.Context) {
	if err := c.copyOnce(ctx, c.lastWritten(), false); err != nil && ctx.Err() == nil {
		c.log.Warn("read the end of the container log", zap.Error(err))
		return
	}
	c.log.Debug("container log stream ended")
}

// open repairs an entry cut short by a crash at the end of the file, finds the resume
// point and opens the file for appending, creating its directories if needed.
func (c *copier) open() error {
	d, err := c.loc.openDir(true)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := truncateIncomplete(d, c.loc.base); err != nil {
		return err
	}
	last, err := resumePoint(d, c.loc.base)
	if err != nil {
		// Resuming from the start duplicates lines; that beats losing them.
		c.log.Warn("cannot find the last timestamp in the log; copying all output", zap.Error(err))
	}
	f, err := openLog(d, c.loc.base)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.f, c.w, c.last = f, NewWriter(f), last
	return nil
}

// openLog opens the file name in d for appending, creating it 0640 if
// needed; a symbolic link at name is refused.
func openLog(d *logDir, name string) (*os.File, error) {
	f, err := d.open(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open log file: %w", err)
	}
	return f, nil
}

// truncateIncomplete cuts a trailing unterminated line (a write cut short by
// a crash) of the file name in d, so that the next entry starts on a line of
// its own. A symbolic link at name is refused.
func truncateIncomplete(d *logDir, name string) error {
	f, err := d.open(name, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open log file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat log file: %w", err)
	}
	n, err := completeLength(f, fi.Size())
	if err != nil {
		return fmt.Errorf("check log file end: %w", err)
	}
	if n == fi.Size() {
		return nil
	}
	if err := f.Truncate(n); err != nil {
		return fmt.Errorf("truncate incomplete entry: %w", err)
	}
	return nil
}

// openExisting opens the file, for appending, in its directory as it is: a
// reopen or repair does not create a directory the kubelet removed. With
// truncate, an entry cut short is cut first.
func (c *copier) openExisting(truncate bool) (*os.File, error) {
	d, err := c.loc.openDir(false)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if truncate {
		if err := truncateIncomplete(d, c.loc.base); err != nil {
			return nil, err
		}
	}
	return openLog(d, c.loc.base)
}

// reopen swaps the file for a new one at the same path.
func (c *copier) reopen() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return nil // not opened yet, or already closed
	}
	f, err := c.openExisting(false)
	if err != nil {
		return err
	}
	if err := c.f.Close(); err != nil {
		c.log.Warn("close rotated log file", zap.Error(err))
	}
	c.f, c.w = f, NewWriter(f)
	return nil
}

// repair reopens the file after a failed write: an entry cut short is
// truncated so that the next one starts on a line of its own. While that
// fails too (no room for the file) the copier has no file and its writes fail
// until a later repair succeeds.
func (c *copier) repair() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f != nil {
		_ = c.f.Close()
		c.f, c.w = nil, nil
	}
	f, err := c.openExisting(true)
	if err != nil {
		c.log.Debug("repair container log", zap.Error(err))
		return
	}
	c.f, c.w = f, NewWriter(f)
}

func (c *copier) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return
	}
	if err := c.f.Close(); err != nil {
		c.log.Warn("close log file", zap.Error(err))
	}
	c.f, c.w = nil, nil
}

func (c *copier) lastWritten() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// emit writes one Docker message as CRI entries unless it is at or before resume.
func (c *copier) emit(resume, ts time.Time, stream string, content []byte, partial bool) error {
	if !ts.After(resume) {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.w == nil {
		return fmt.Errorf("%w: file closed", errWrite)
	}
	if err := c.w.WriteEntry(ts, stream, content, partial); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	if ts.After(c.last) {
		c.last = ts
	}
	return nil
}

// copyOnce reads the stream once from resume, following it if follow is set. It
// returns nil at EOF.
func (c *copier) copyOnce(ctx context.Context, resume time.Time, follow bool) error {
	rc, err := c.src.ContainerLogs(ctx, c.id, logsOptions(resume, follow))
	if err != nil {
		return &sourceError{err: err}
	}
	defer rc.Close()
	// Unblock a pending Read when ctx ends, whatever the Source does with ctx.
	stop := context.AfterFunc(ctx, func() { rc.Close() })
	defer stop()
	if c.tty {
		err = copyRaw(rc, func(ts time.Time, content []byte, partial bool) error {
			return c.emit(resume, ts, StreamStdout, content, partial)
		})
	} else {
		stdout := &messageSink{emit: func(ts time.Time, content []byte, partial bool) error {
			return c.emit(resume, ts, StreamStdout, content, partial)
		}}
		stderr := &messageSink{emit: func(ts time.Time, content []byte, partial bool) error {
			return c.emit(resume, ts, StreamStderr, content, partial)
		}}
		_, err = libdocker.DemuxStream(stdout, stderr, rc)
	}
	if err != nil {
		return fmt.Errorf("copy log stream: %w", err)
	}
	return nil
}

// logsOptions asks for both streams with timestamps since resume.
func logsOptions(resume time.Time, follow bool) libdocker.LogsOptions {
	opts := libdocker.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: follow, Timestamps: true}
	if !resume.IsZero() {
		opts.Since = fmt.Sprintf("%d.%09d", resume.Unix(), resume.Nanosecond())
	}
	return opts
}
