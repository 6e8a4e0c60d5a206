package kuberuntime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// LogOptions selects what ReadLogs returns.
type LogOptions struct {
	// Tail is the number of lines from the end of the file to start at; negative
	// means the whole file, 0 means none (with Follow: only new lines).
	Tail int64
	// Follow keeps reading new lines, across log rotations, until the container is
	// no longer running or ctx ends.
	Follow bool
	// Since drops lines logged before it (zero: none dropped).
	Since time.Time
	// Timestamps prefixes every line with its RFC3339Nano timestamp and a space.
	Timestamps bool
	// LimitBytes stops after that many bytes of output (0 or negative: no limit).
	LimitBytes int64
}

// Follow-mode timings.
const (
	logPollInterval       = 100 * time.Millisecond // how often to look for new data at EOF
	logStateCheckInterval = time.Second            // how often to ask whether the container still runs
)

// errLogLimitReached ends reading once LimitBytes have been written.
var errLogLimitReached = errors.New("log byte limit reached")

// ReadLogs writes the container log at path to stdout and stderr (a nil writer drops
// that stream), as the kubelet serves `kubectl logs`. It reads the CRI format
// ("<RFC3339Nano> <stdout|stderr> <F|P> <content>") and Docker's json-file format,
// and joins partial (P) lines. With opts.Follow it follows the file (reopening it
// after a rotation) until the container, checked every second through the runtime,
// is no longer running; it then returns nil, or ctx's error when ctx ends first.
// A nil opts reads the whole file.
func (m *Manager) ReadLogs(ctx context.Context, path, containerID string, opts *LogOptions, stdout, stderr io.Writer) error {
	if opts == nil {
		opts = &LogOptions{Tail: -1}
	}
	r := &logReader{
		path:          path,
		containerID:   containerID,
		opts:          opts,
		out:           newLogWriter(stdout, stderr, opts),
		running:       m.containerRunning,
		logger:        m.logger,
		pollInterval:  logPollInterval,
		stateInterval: logStateCheckInterval,
	}
	err := r.run(ctx)
	if errors.Is(err, errLogLimitReached) {
		return nil
	}
	return err
}

// containerRunning reports whether the container is still running (created counts:
// it may start). A container the runtime no longer knows is not running.
func (m *Manager) containerRunning(ctx context.Context, id string) (bool, error) {
	resp, err := m.runtime.ContainerStatus(ctx, id, false)
	if grpcstatus.Code(err) == codes.NotFound {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("container status %s: %w", id, err)
	}
	switch resp.GetStatus().GetState() {
	case runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.ContainerState_CONTAINER_CREATED:
		return true, nil
	}
	return false, nil
}

// logReader is one ReadLogs call.
type logReader struct {
	path          string
	containerID   string
	opts          *LogOptions
	out           *logWriter
	running       func(ctx context.Context, id string) (bool, error)
	logger        *zap.Logger
	pollInterval  time.Duration
	stateInterval time.Duration

	f       *os.File
	br      *bufio.Reader
	pending []byte // an incomplete last line, waiting for its end (follow mode)
}

func (r *logReader) run(ctx context.Context) error {
	f, err := os.Open(r.path)
	if err != nil {
		return fmt.Errorf("open log file %q: %w", r.path, err)
	}
	r.setFile(f)
	defer func() { r.f.Close() }()
	if r.opts.Tail >= 0 {
		off, err := tailOffset(f, r.opts.Tail)
		if err != nil {
			return fmt.Errorf("find the last %d lines of %q: %w", r.opts.Tail, r.path, err)
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return fmt.Errorf("seek %q: %w", r.path, err)
		}
		r.br.Reset(f)
	}
	if !r.opts.Follow {
		return r.drain(ctx)
	}
	return r.follow(ctx)
}

func (r *logReader) setFile(f *os.File) {
	r.f = f
	if r.br == nil {
		r.br = bufio.NewReaderSize(f, 64*1024)
	} else {
		r.br.Reset(f)
	}
	r.pending = r.pending[:0]
}

// readAvailable writes every complete line up to the current end of the file and
// keeps an incomplete last line pending.
func (r *logReader) readAvailable(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		chunk, err := r.br.ReadSlice('\n')
		r.pending = append(r.pending, chunk...)
		switch {
		case err == nil:
			if werr := r.emit(r.pending); werr != nil {
				return werr
			}
			r.pending = r.pending[:0]
		case errors.Is(err, bufio.ErrBufferFull):
			// A line longer than the buffer: keep collecting.
		case errors.Is(err, io.EOF):
			return nil
		default:
			return fmt.Errorf("read %q: %w", r.path, err)
		}
	}
}

// drain reads to the end of the file, including an unterminated last line.
func (r *logReader) drain(ctx context.Context) error {
	if err := r.readAvailable(ctx); err != nil {
		return err
	}
	if len(r.pending) == 0 {
		return nil
	}
	line := append(r.pending, '\n')
	r.pending = r.pending[:0]
	return r.emit(line)
}

// follow reads as the file grows. At the end of the data it switches to a new file
// at the same path once the old one was rotated away, and stops (after a last read)
// once the container no longer runs.
func (r *logReader) follow(ctx context.Context) error {
	lastCheck := time.Now()
	for {
		if err := r.readAvailable(ctx); err != nil {
			return err
		}
		if rotated, err := r.reopenIfRotated(ctx); err != nil {
			return err
		} else if rotated {
			continue
		}
		if r.containerID != "" && time.Since(lastCheck) >= r.stateInterval {
			lastCheck = time.Now()
			running, err := r.running(ctx, r.containerID)
			if err != nil {
				return err
			}
			if !running {
				// Whatever the container wrote before it exited is in the file now.
				return r.drain(ctx)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.pollInterval):
		}
	}
}

// reopenIfRotated switches to the file now at the path when it is not the open one
// (the old one was renamed by log rotation), after reading what was appended to the
// old one meanwhile. Until the runtime creates the new file there is nothing to
// switch to.
func (r *logReader) reopenIfRotated(ctx context.Context) (bool, error) {
	cur, err := os.Stat(r.path)
	if err != nil {
		return false, nil
	}
	open, err := r.f.Stat()
	if err != nil {
		return false, fmt.Errorf("stat open log file %q: %w", r.path, err)
	}
	if os.SameFile(cur, open) {
		return false, nil
	}
	// The runtime writes to the new file once it exists: finish the old one. A line
	// it never finished is written out as it is.
	if err := r.readAvailable(ctx); err != nil {
		return false, err
	}
	if len(r.pending) > 0 {
		if err := r.emit(append(r.pending, '\n')); err != nil {
			return false, err
		}
	}
	f, err := os.Open(r.path)
	if err != nil {
		return false, nil // rotated again in between: try later
	}
	r.f.Close()
	r.setFile(f)
	r.logger.Debug("following rotated container log", zap.String("path", r.path))
	return true, nil
}

// emit parses one line (with its newline) and writes it; unparsable lines are
// skipped.
func (r *logReader) emit(line []byte) error {
	msg, err := parseLogLine(line)
	if err != nil {
		r.logger.Debug("skip unparsable container log line", zap.String("path", r.path), zap.Error(err))
		return nil
	}
	return r.out.write(msg)
}

// logMessage is one parsed log line.
type logMessage struct {
	timestamp time.Time
	stream    runtimeapi.LogStreamType
	content   []byte // ends with '\n' unless partial
	partial   bool
}

// parseLogLine parses a CRI or Docker json-file log line (including its newline).
func parseLogLine(line []byte) (logMessage, error) {
	if len(line) > 0 && line[0] == '{' {
		return parseJSONLogLine(line)
	}
	return parseCRILogLine(line)
}

// parseCRILogLine parses "<timestamp> <stream> <tag>[:<more tags>] <content>\n".
func parseCRILogLine(line []byte) (logMessage, error) {
	var msg logMessage
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return msg, errors.New("timestamp is not found")
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return msg, fmt.Errorf("unexpected timestamp %q: %w", ts, err)
	}
	msg.timestamp = t
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return msg, errors.New("stream type is not found")
	}
	msg.stream = runtimeapi.LogStreamType(stream)
	if msg.stream != runtimeapi.Stdout && msg.stream != runtimeapi.Stderr {
		return msg, fmt.Errorf("unexpected stream type %q", stream)
	}
	tags, content, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return msg, errors.New("log tag is not found")
	}
	tag, _, _ := bytes.Cut(tags, []byte{':'})
	msg.partial = runtimeapi.LogTag(tag) == runtimeapi.LogTagPartial
	if msg.partial {
		content = bytes.TrimSuffix(content, []byte{'\n'})
	}
	msg.content = content
	return msg, nil
}

// parseJSONLogLine parses a Docker json-file line: {"log":..,"stream":..,"time":..}.
func parseJSONLogLine(line []byte) (logMessage, error) {
	var msg logMessage
	var entry struct {
		Log    string    `json:"log"`
		Stream string    `json:"stream"`
		Time   time.Time `json:"time"`
	}
	if err := json.Unmarshal(line, &entry); err != nil {
		return msg, fmt.Errorf("decode json log line: %w", err)
	}
	msg.stream = runtimeapi.LogStreamType(entry.Stream)
	if msg.stream != runtimeapi.Stdout && msg.stream != runtimeapi.Stderr {
		return msg, fmt.Errorf("unexpected stream type %q", entry.Stream)
	}
	msg.timestamp = entry.Time
	msg.content = []byte(entry.Log)
	msg.partial = len(msg.content) == 0 || msg.content[len(msg.content)-1] != '\n'
	return msg, nil
}

// logWriter writes messages to the stream writers, applying Since, Timestamps and
// LimitBytes.
type logWriter struct {
	stdout, stderr io.Writer
	since          time.Time
	timestamps     bool
	limited        bool
	remaining      int64
	midLine        map[runtimeapi.LogStreamType]bool // the stream's last piece was partial
}

func newLogWriter(stdout, stderr io.Writer, opts *LogOptions) *logWriter {
	return &logWriter{
		stdout:     stdout,
		stderr:     stderr,
		since:      opts.Since,
		timestamps: opts.Timestamps,
		limited:    opts.LimitBytes > 0,
		remaining:  opts.LimitBytes,
		midLine:    map[runtimeapi.LogStreamType]bool{},
	}
}

// write writes one message. The timestamp prefix goes only at the start of a line,
// not before the continuation of a partial one. It returns errLogLimitReached once
// the byte limit is used up.
func (w *logWriter) write(msg logMessage) error {
	if !w.since.IsZero() && msg.timestamp.Before(w.since) {
		return nil
	}
	out := w.stdout
	if msg.stream == runtimeapi.Stderr {
		out = w.stderr
	}
	if out == nil {
		return nil
	}
	data := msg.content
	if w.timestamps && !w.midLine[msg.stream] {
		data = append([]byte(msg.timestamp.Format(time.RFC3339Nano)+" "), data...)
	}
	w.midLine[msg.stream] = msg.partial
	full := true
	if w.limited && int64(len(data)) >= w.remaining {
		data, full = data[:w.remaining], int64(len(data)) == w.remaining
	}
	n, err := out.Write(data)
	if err != nil {
		return fmt.Errorf("write log output: %w", err)
	}
	if w.limited {
		w.remaining -= int64(n)
		if w.remaining <= 0 || !full {
			return errLogLimitReached
		}
	}
	return nil
}

// tailOffset returns the offset at which the last n lines of f start, reading the
// file backwards in blocks. A newline ending the file ends the last line rather
// than starting an empty one.
func tailOffset(f *os.File, n int64) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	if n == 0 {
		return size, nil
	}
	const blockSize = 32 * 1024
	buf := make([]byte, blockSize)
	var seen int64
	for end := size; end > 0; {
		start := max(end-blockSize, 0)
		block := buf[:end-start]
		if _, err := f.ReadAt(block, start); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		for i := len(block) - 1; i >= 0; i-- {
			if block[i] != '\n' || start+int64(i) == size-1 {
				continue
			}
			seen++
			if seen == n {
				return start + int64(i) + 1, nil
			}
		}
		end = start
	}
	return 0, nil
}
