package kuberuntime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

// rcBuffer is a goroutine-safe buffer.
type rcBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *rcBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *rcBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// rcWriteFile writes content to a new file in a temp dir and returns its path.
func rcWriteFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func rcAppend(t *testing.T, path, content string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
}

func TestParseLogLine(t *testing.T) {
	t.Parallel()
	ts := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	for _, tc := range []struct {
		desc, line  string
		wantStream  runtimeapi.LogStreamType
		wantContent string
		wantPartial bool
		wantErr     string
	}{
		{desc: "CRI full", line: "2024-05-06T07:08:09.123456789Z stdout F hello world\n", wantStream: "stdout", wantContent: "hello world\n"},
		{desc: "CRI partial", line: "2024-05-06T07:08:09.123456789Z stderr P part one\n", wantStream: "stderr", wantContent: "part one", wantPartial: true},
		{desc: "CRI extra tags", line: "2024-05-06T07:08:09.123456789Z stdout F:x:y tagged\n", wantStream: "stdout", wantContent: "tagged\n"},
		{desc: "CRI empty content", line: "2024-05-06T07:08:09.123456789Z stdout F \n", wantStream: "stdout", wantContent: "\n"},
		{desc: "CRI content with spaces kept", line: "2024-05-06T07:08:09.123456789Z stdout F  a  b \n", wantStream: "stdout", wantContent: " a  b \n"},
		{desc: "CRI offset timestamp", line: "2024-05-06T09:08:09.123456789+02:00 stdout F x\n", wantStream: "stdout", wantContent: "x\n"},
		{desc: "json full", line: `{"log":"hello\n","stream":"stdout","time":"2024-05-06T07:08:09.123456789Z"}` + "\n", wantStream: "stdout", wantContent: "hello\n"},
		{desc: "json partial", line: `{"log":"hel","stream":"stderr","time":"2024-05-06T07:08:09.123456789Z"}` + "\n", wantStream: "stderr", wantContent: "hel", wantPartial: true},
		{desc: "no tag", line: "2024-05-06T07:08:09.123456789Z stdout\n", wantErr: "stream type is not found"},
		{desc: "no tag field", line: "2024-05-06T07:08:09.123456789Z stdout F\n", wantErr: "log tag is not found"},
		{desc: "bad stream", line: "2024-05-06T07:08:09.123456789Z stdin F x\n", wantErr: "unexpected stream type"},
		{desc: "bad timestamp", line: "yesterday stdout F x\n", wantErr: "unexpected timestamp"},
		{desc: "json bad stream", line: `{"log":"x\n","stream":"tty","time":"2024-05-06T07:08:09Z"}` + "\n", wantErr: "unexpected stream type"},
		{desc: "json broken", line: `{"log":` + "\n", wantErr: "decode json"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			msg, err := parseLogLine([]byte(tc.line))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseLogLine: %v", err)
			}
			if msg.stream != tc.wantStream || string(msg.content) != tc.wantContent || msg.partial != tc.wantPartial || !msg.timestamp.Equal(ts) {
				t.Errorf("got %+v (content %q)", msg, msg.content)
			}
		})
	}
}

// rcLog is a CRI log with both streams, a split line and an unparsable line.
const rcLog = "2024-01-01T00:00:01Z stdout F one\n" +
	"2024-01-01T00:00:02Z stderr F err one\n" +
	"garbage line\n" +
	"2024-01-01T00:00:03Z stdout P tw\n" +
	"2024-01-01T00:00:03.5Z stderr F err two\n" +
	"2024-01-01T00:00:04Z stdout F o\n" +
	"2024-01-01T00:00:05Z stdout F three\n"

func TestReadLogs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc          string
		content       string
		opts          *LogOptions
		noStderr      bool
		stdout, stder string
	}{
		{desc: "nil options: everything", content: rcLog, opts: nil, stdout: "one\ntwo\nthree\n", stder: "err one\nerr two\n"},
		{desc: "tail 2", content: rcLog, opts: &LogOptions{Tail: 2}, stdout: "o\nthree\n"},
		{desc: "tail 0", content: rcLog, opts: &LogOptions{Tail: 0}},
		{desc: "tail larger than the file", content: rcLog, opts: &LogOptions{Tail: 100}, stdout: "one\ntwo\nthree\n", stder: "err one\nerr two\n"},
		{desc: "since", content: rcLog, opts: &LogOptions{Tail: -1, Since: time.Date(2024, 1, 1, 0, 0, 3, 0, time.UTC)}, stdout: "two\nthree\n", stder: "err two\n"},
		{
			desc: "timestamps only at line starts", content: rcLog, opts: &LogOptions{Tail: -1, Timestamps: true},
			stdout: "2024-01-01T00:00:01Z one\n2024-01-01T00:00:03Z two\n2024-01-01T00:00:05Z three\n",
			stder:  "2024-01-01T00:00:02Z err one\n2024-01-01T00:00:03.5Z err two\n",
		},
		{desc: "limit bytes across streams", content: rcLog, opts: &LogOptions{Tail: -1, LimitBytes: 10}, stdout: "one\n", stder: "err on"},
		{desc: "limit exactly at a line end", content: rcLog, opts: &LogOptions{Tail: -1, LimitBytes: 4}, stdout: "one\n"},
		{desc: "nil stderr writer drops stderr", content: rcLog, opts: &LogOptions{Tail: -1}, noStderr: true, stdout: "one\ntwo\nthree\n"},
		{
			desc:    "docker json-file",
			content: `{"log":"a\n","stream":"stdout","time":"2024-01-01T00:00:01Z"}` + "\n" + `{"log":"b","stream":"stdout","time":"2024-01-01T00:00:02Z"}` + "\n" + `{"log":"c\n","stream":"stdout","time":"2024-01-01T00:00:02Z"}` + "\n" + `{"log":"e\n","stream":"stderr","time":"2024-01-01T00:00:03Z"}` + "\n",
			opts:    &LogOptions{Tail: -1}, stdout: "a\nbc\n", stder: "e\n",
		},
		{desc: "unterminated last line", content: "2024-01-01T00:00:01Z stdout F one\n2024-01-01T00:00:02Z stdout F two", opts: &LogOptions{Tail: -1}, stdout: "one\ntwo\n"},
		{desc: "tail 1 without a final newline", content: "2024-01-01T00:00:01Z stdout F one\n2024-01-01T00:00:02Z stdout F two", opts: &LogOptions{Tail: 1}, stdout: "two\n"},
		{desc: "empty file", content: "", opts: &LogOptions{Tail: 10}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			env := newRCEnv(t)
			path := rcWriteFile(t, tc.content)
			var stdout, stderr bytes.Buffer
			var errW io.Writer = &stderr
			if tc.noStderr {
				errW = nil
			}
			err := env.m.ReadLogs(context.Background(), path, "", tc.opts, &stdout, errW)
			if err != nil {
				t.Fatalf("ReadLogs: %v", err)
			}
			if stdout.String() != tc.stdout || stderr.String() != tc.stder {
				t.Errorf("stdout %q stderr %q, want %q and %q", stdout.String(), stderr.String(), tc.stdout, tc.stder)
			}
		})
	}
}

func TestReadLogsMissingFile(t *testing.T) {
	t.Parallel()
	env := newRCEnv(t)
	err := env.m.ReadLogs(context.Background(), filepath.Join(t.TempDir(), "nope.log"), "", nil, &bytes.Buffer{}, &bytes.Buffer{})
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want not exist", err)
	}
}

func TestTailOffsetLargeFile(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := 0; i < 20000; i++ {
		fmt.Fprintf(&b, "2024-01-01T00:00:00Z stdout F line %05d\n", i)
	}
	path := rcWriteFile(t, b.String())
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, n := range []int64{1, 7, 1500, 19999, 20000, 25000} {
		off, err := tailOffset(f, n)
		if err != nil {
			t.Fatalf("tailOffset(%d): %v", n, err)
		}
		rest := b.String()[off:]
		lines := strings.Count(rest, "\n")
		wantLines := min(n, 20000)
		if int64(lines) != wantLines || (off > 0 && b.String()[off-1] != '\n') {
			t.Errorf("tailOffset(%d) = %d: %d lines follow, want %d starting at a line", n, off, lines, wantLines)
		}
	}
}

// rcFollowReader returns a follow-mode logReader with short intervals whose running
// check reads the flag.
func rcFollowReader(t *testing.T, path string, opts *LogOptions, out *rcBuffer, running *atomic.Bool) *logReader {
	return &logReader{
		path:        path,
		containerID: "c1",
		opts:        opts,
		out:         newLogWriter(out, out, opts),
		running: func(context.Context, string) (bool, error) {
			return running.Load(), nil
		},
		logger:        zaptest.NewLogger(t),
		pollInterval:  5 * time.Millisecond,
		stateInterval: 20 * time.Millisecond,
	}
}

// rcWaitFor waits until out contains want.
func rcWaitFor(t *testing.T, out *rcBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %q; have %q", want, out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestReadLogsFollowRotation(t *testing.T) {
	t.Parallel()
	path := rcWriteFile(t, "2024-01-01T00:00:01Z stdout F old1\n2024-01-01T00:00:02Z stdout F old2\n")
	out := &rcBuffer{}
	var running atomic.Bool
	running.Store(true)
	r := rcFollowReader(t, path, &LogOptions{Tail: 1, Follow: true}, out, &running)
	done := make(chan error, 1)
	go func() { done <- r.run(context.Background()) }()

	rcWaitFor(t, out, "old2\n")
	// A line written in two pieces comes out once, whole.
	rcAppend(t, path, "2024-01-01T00:00:03Z stdout F ha")
	time.Sleep(30 * time.Millisecond)
	rcAppend(t, path, "lf\n")
	rcWaitFor(t, out, "half\n")

	// Rotation: rename, a late write to the old file, then the new file appears.
	if err := os.Rename(path, path+".20240101-000004"); err != nil {
		t.Fatal(err)
	}
	rcAppend(t, path+".20240101-000004", "2024-01-01T00:00:04Z stdout F late\n")
	time.Sleep(30 * time.Millisecond)
	rcAppend(t, path, "2024-01-01T00:00:05Z stdout F new1\n")
	rcWaitFor(t, out, "new1\n")
	rcAppend(t, path, "2024-01-01T00:00:06Z stdout F last\n")
	running.Store(false)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("follow did not stop after the container exited")
	}
	if want := "old2\nhalf\nlate\nnew1\nlast\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
}

func TestReadLogsFollowCancel(t *testing.T) {
	t.Parallel()
	path := rcWriteFile(t, "2024-01-01T00:00:01Z stdout F one\n")
	out := &rcBuffer{}
	var running atomic.Bool
	running.Store(true)
	r := rcFollowReader(t, path, &LogOptions{Tail: -1, Follow: true}, out, &running)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.run(ctx) }()
	rcWaitFor(t, out, "one\n")
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("follow did not stop on cancel")
	}
}

// TestReadLogsFollowRuntimeState follows through ReadLogs itself: the container's
// state comes from the runtime (checked every second).
func TestReadLogsFollowRuntimeState(t *testing.T) {
	t.Parallel()
	env := newRCEnv(t)
	env.runtime.SetFakeContainers([]*critest.FakeContainer{{ContainerStatus: runtimeapi.ContainerStatus{
		Id: "c1", State: runtimeapi.ContainerState_CONTAINER_RUNNING, Metadata: &runtimeapi.ContainerMetadata{Name: "c"}}}})
	path := rcWriteFile(t, "2024-01-01T00:00:01Z stdout F one\n")
	out := &rcBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- env.m.ReadLogs(context.Background(), path, "c1", &LogOptions{Tail: -1, Follow: true}, out, out)
	}()
	rcWaitFor(t, out, "one\n")
	rcAppend(t, path, "2024-01-01T00:00:02Z stderr F two\n")
	rcWaitFor(t, out, "two\n")
	select {
	case err := <-done:
		t.Fatalf("returned while the container runs: %v", err)
	case <-time.After(1200 * time.Millisecond):
	}
	env.runtime.Lock()
	env.runtime.Containers["c1"].State = runtimeapi.ContainerState_CONTAINER_EXITED
	env.runtime.Unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ReadLogs: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("follow did not stop after the container exited")
	}
}
