package containerlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

const (
	stdoutID = 1
	stderrID = 2
)

// newManager returns a Manager whose log root holds every t.TempDir.
func newManager(t *testing.T, src Source) *Manager {
	t.Helper()
	return newManagerAt(t, src, os.TempDir())
}

// newManagerAt is newManager with logRoot as its log root.
func newManagerAt(t *testing.T, src Source, logRoot string) *Manager {
	t.Helper()
	m, err := NewManager(Options{Source: src, LogRoot: logRoot, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	m.retryBackoff = 5 * time.Millisecond
	m.maxBackoff = 20 * time.Millisecond
	return m
}

// followToEnd follows id into path and waits for the copier to finish.
func followToEnd(t *testing.T, m *Manager, path string, tty bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m.Follow(ctx, "c1", path, tty)
	if err := m.Wait(ctx, "c1"); err != nil {
		t.Fatalf("Wait: %v", err)
	}
}

func logPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "pods", "ns_pod_uid", "app", "0.log")
}

func TestNewManagerRequiresSourceAndLogRoot(t *testing.T) {
	if _, err := NewManager(Options{LogRoot: "/var/log/pods"}); err == nil {
		t.Error("NewManager without a Source succeeded")
	}
	for _, root := range []string{"", "var/log/pods"} {
		if _, err := NewManager(Options{Source: &fakeSource{}, LogRoot: root}); err == nil {
			t.Errorf("NewManager with LogRoot %q succeeded", root)
		}
	}
}

func TestFollowMultiplexed(t *testing.T) {
	ms := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }
	big := strings.Repeat("b", 40000)
	src := &fakeSource{results: []func(context.Context) (io.ReadCloser, error){canned(muxStream(
		message{stdoutID, ms(1), "out-1\n"},
		message{stderrID, ms(2), "err-1\n"},
		message{stdoutID, ms(3), "\n"},
		// Docker cut a 40000-byte line into 16 KiB pieces sharing one timestamp.
		message{stderrID, ms(4), big[:dockerSplitSize]},
		message{stderrID, ms(4), big[dockerSplitSize : 2*dockerSplitSize]},
		message{stderrID, ms(4), big[2*dockerSplitSize:] + "\n"},
		message{stdoutID, ms(5), "out-2\n"},
		message{stdoutID, ms(6), "no newline at the end"},
	))}}
	m := newManager(t, src)
	path := logPath(t)
	followToEnd(t, m, path, false)

	entries := readCRIFile(t, path)
	got := joinLines(entries)
	want := map[string][]string{
		"stdout": {"out-1", "", "out-2", "no newline at the end<partial>"},
		"stderr": {"err-1", big},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("lines = %.200q, want %.200q", got, want)
	}
	for i := 1; i < len(entries); i++ {
		if entries[i].ts.Before(entries[i-1].ts) {
			t.Fatalf("entry %d goes back in time: %v after %v", i, entries[i].ts, entries[i-1].ts)
		}
	}
	if !entries[0].ts.Equal(ms(1)) {
		t.Fatalf("first entry at %v, want Docker's timestamp %v", entries[0].ts, ms(1))
	}
	// One follow from the start, then one catch-up read since the last entry (the
	// canned stream repeats: nothing is written twice).
	calls := src.Calls()
	wantCalls := []libdocker.LogsOptions{
		{ShowStdout: true, ShowStderr: true, Follow: true, Timestamps: true},
		{ShowStdout: true, ShowStderr: true, Timestamps: true, Since: fmt.Sprintf("%d.%09d", ms(6).Unix(), ms(6).Nanosecond())},
	}
	if !reflect.DeepEqual(calls, wantCalls) {
		t.Fatalf("ContainerLogs calls = %+v, want %+v", calls, wantCalls)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Fatalf("log file mode = %v, want 0640", fi.Mode().Perm())
	}
}

func TestFollowResumesAfterLastTimestamp(t *testing.T) {
	resume := time.Date(2024, 5, 6, 7, 8, 9, 500000000, time.UTC)
	path := logPath(t)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	// The file already holds everything up to resume, and a half-written entry.
	existing := "2024-05-06T07:08:09.1Z stdout F old-1\n2024-05-06T07:08:09.5Z stderr F old-2\n2024-05-06T07:08:09.6Z std"
	if err := os.WriteFile(path, []byte(existing), 0o640); err != nil {
		t.Fatal(err)
	}
	// Docker's since is inclusive (and second-granular on some versions).
	src := &fakeSource{results: []func(context.Context) (io.ReadCloser, error){canned(muxStream(
		message{stdoutID, t0, "before since\n"},
		message{stdoutID, resume.Add(-400 * time.Millisecond), "old-1\n"},
		message{stderrID, resume, "old-2\n"},
		message{stdoutID, resume.Add(time.Nanosecond), "new-1\n"},
		message{stderrID, resume.Add(time.Millisecond), "new-2\n"},
	))}}
	m := newManager(t, src)
	followToEnd(t, m, path, false)

	got := joinLines(readCRIFile(t, path))
	want := map[string][]string{"stdout": {"old-1", "new-1"}, "stderr": {"old-2", "new-2"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("lines = %q, want %q", got, want)
	}
	if calls := src.Calls(); len(calls) != 2 || calls[0].Since != "1714979289.500000000" {
		t.Fatalf("ContainerLogs calls = %+v, want a follow with Since 1714979289.500000000 and a catch-up", calls)
	}
}

func TestFollowResumeWithInterleavedStreams(t *testing.T) {
	us := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Microsecond) }
	path := logPath(t)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	// Docker wrote stdout's message of t0+2µs before stderr's of t0+1µs, and the
	// previous shim copied both.
	existing := "2024-05-06T07:08:09.000002Z stdout F out\n2024-05-06T07:08:09.000001Z stderr F err\n"
	if err := os.WriteFile(path, []byte(existing), 0o640); err != nil {
		t.Fatal(err)
	}
	src := &fakeSource{results: []func(context.Context) (io.ReadCloser, error){canned(muxStream(
		message{stdoutID, us(2), "out\n"},
		message{stderrID, us(1), "err\n"},
		message{stdoutID, us(3), "new\n"},
	))}}
	m := newManager(t, src)
	followToEnd(t, m, path, false)
	got := joinLines(readCRIFile(t, path))
	want := map[string][]string{"stdout": {"out", "new"}, "stderr": {"err"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("lines = %q, want %q", got, want)
	}
}

func TestFollowTTY(t *testing.T) {
	ms := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }
	big := strings.Repeat("t", 2*dockerSplitSize+100)
	exact := strings.Repeat("e", dockerSplitSize)
	src := &fakeSource{results: []func(context.Context) (io.ReadCloser, error){canned(rawStream(
		message{stdoutID, ms(1), "prompt$ ls\r\n"},
		message{stdoutID, ms(2), big[:dockerSplitSize]},
		message{stdoutID, ms(2), big[dockerSplitSize : 2*dockerSplitSize]},
		message{stdoutID, ms(2), big[2*dockerSplitSize:] + "\n"},
		// A line of exactly the split size: Docker logs the newline on its own.
		message{stdoutID, ms(3), exact},
		message{stdoutID, ms(3), "\n"},
		message{stdoutID, ms(4), "bye"},
	))}}
	m := newManager(t, src)
	path := logPath(t)
	followToEnd(t, m, path, true)

	got := joinLines(readCRIFile(t, path))
	want := map[string][]string{"stdout": {"prompt$ ls\r", big, exact, "bye<partial>"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("lines = %.300q, want %.300q", got, want)
	}
}

func TestFollowIdempotent(t *testing.T) {
	pr, pw := io.Pipe()
	src := &fakeSource{results: []func(context.Context) (io.ReadCloser, error){
		func(context.Context) (io.ReadCloser, error) { return pr, nil },
	}}
	m := newManager(t, src)
	path := logPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m.Follow(ctx, "c1", path, false)
	if _, err := pw.Write(frame(stdoutID, dockerTS(t0)+" first\n")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "first line", fileContains(path, "first"))
	m.Follow(ctx, "c1", path, false)
	m.Follow(ctx, "c1", path, true)
	if _, err := pw.Write(frame(stdoutID, dockerTS(t0.Add(1))+" second\n")); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := m.Wait(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if n := followCalls(src); n != 1 {
		t.Fatalf("ContainerLogs called %d times with Follow, want 1", n)
	}
	if got := joinLines(readCRIFile(t, path)); !reflect.DeepEqual(got["stdout"], []string{"first", "second"}) {
		t.Fatalf("lines = %q", got)
	}
}

func TestWait(t *testing.T) {
	pr, pw := io.Pipe()
	src := &fakeSource{results: []func(context.Context) (io.ReadCloser, error){
		func(context.Context) (io.ReadCloser, error) { return pr, nil },
	}}
	m := newManager(t, src)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if err := m.Wait(ctx, "unknown"); err != nil {
		t.Fatalf("Wait for a container without a copier: %v", err)
	}
	m.Follow(ctx, "c1", logPath(t), false)

	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := m.Wait(short, "c1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a running copier = %v, want DeadlineExceeded", err)
	}

	done := make(chan error, 1)
	go func() { done <- m.Wait(ctx, "c1") }()
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v before EOF", err)
	case <-time.After(50 * time.Millisecond):
	}
	pw.Close() // the container exited: EOF
	if err := <-done; err != nil {
		t.Fatalf("Wait after EOF: %v", err)
	}
	if err := m.Wait(ctx, "c1"); err != nil {
		t.Fatalf("Wait after the copier finished: %v", err)
	}
}

func TestStop(t *testing.T) {
	pr, _ := io.Pipe() // never written: only cancellation ends the copier
	src := &fakeSource{results: []func(context.Context) (io.ReadCloser, error){
		func(context.Context) (io.ReadCloser, error) { return pr, nil },
	}}
	m := newManager(t, src)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m.Stop("c1") // nothing runs: no-op
	m.Follow(ctx, "c1", logPath(t), false)
	waitFor(t, "ContainerLogs call", func() bool { return len(src.Calls()) == 1 })
	m.Stop("c1")
	if err := m.Wait(ctx, "c1"); err != nil {
		t.Fatalf("Wait after Stop: %v", err)
	}
	if n := len(src.Calls()); n != 1 {
		t.Fatalf("ContainerLogs called %d times after Stop, want 1 (no retry)", n)
	}
}

func TestReopen(t *testing.T) {
	pr, pw := io.Pipe()
	src := &fakeSource{results: []func(context.Context) (io.ReadCloser, error){
		func(context.Context) (io.ReadCloser, error) { return pr, nil },
	}}
	m := newManager(t, src)
	path := logPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if err := m.Reopen("c1"); err != nil {
		t.Fatalf("Reopen without a copier: %v", err)
	}
	m.Follow(ctx, "c1", path, false)
	write := func(i int, line string) {
		t.Helper()
		if _, err := pw.Write(frame(stdoutID, dockerTS(t0.Add(time.Duration(i)))+" "+line+"\n")); err != nil {
			t.Fatal(err)
		}
	}
	write(1, "before-rotation")
	waitFor(t, "first line", fileContains(path, "before-rotation"))

	rotated := path + ".20240506-070809"
	if err := os.Rename(path, rotated); err != nil {
		t.Fatal(err)
	}
	if err := m.Reopen("c1"); err != nil {
		t.Fatalf("Reopen: %v", err)
	}
	write(2, "after-rotation")
	pw.Close()
	if err := m.Wait(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if got := joinLines(readCRIFile(t, rotated)); !reflect.DeepEqual(got["stdout"], []string{"before-rotation"}) {
		t.Fatalf("rotated file lines = %q", got)
	}
	if got := joinLines(readCRIFile(t, path)); !reflect.DeepEqual(got["stdout"], []string{"after-rotation"}) {
		t.Fatalf("new file lines = %q", got)
	}
}

func TestReopenFailure(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	src := &fakeSource{results: []func(context.Context) (io.ReadCloser, error){
		func(context.Context) (io.ReadCloser, error) { return pr, nil },
	}}
	m := newManager(t, src)
	path := logPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m.Follow(ctx, "c1", path, false)
	if _, err := pw.Write(frame(stdoutID, dockerTS(t0)+" x\n")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "first line", fileContains(path, " x"))
	// The kubelet moved the file and a directory took its place: reopening fails.
	if err := os.Rename(path, path+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.Reopen("c1"); err == nil || !strings.Contains(err.Error(), "c1") {
		t.Fatalf("Reopen onto a directory = %v, want an error naming the container", err)
	}
}

func TestSourceErrorStops(t *testing.T) {
	for _, tc := range []struct {
		desc string
		err  error
	}{
		{desc: "container not found", err: fmt.Errorf("docker logs c1: %w", libdocker.ErrNotFound)},
		{desc: "daemon unreachable at start", err: errors.New("connection refused")},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			src := &fakeSource{results: []func(context.Context) (io.ReadCloser, error){failing(tc.err)}}
			m := newManager(t, src)
			followToEnd(t, m, logPath(t), false)
			if n := len(src.Calls()); n != 1 {
				t.Fatalf("ContainerLogs called %d times, want 1", n)
			}
		})
	}
}

func TestRetryAfterBrokenStream(t *testing.T) {
	ms := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }
	src := &fakeSource{results: []func(context.Context) (io.ReadCloser, error){
		broken(muxStream(message{stdoutID, ms(1), "one\n"}, message{stderrID, ms(2), "two\n"})),
		failing(errors.New("connection refused")), // the daemon is restarting
		canned(muxStream(
			message{stdoutID, ms(1), "one\n"}, // since is inclusive: repeated
			message{stderrID, ms(2), "two\n"},
			message{stdoutID, ms(3), "three\n"},
		)),
	}, states: []func() (libdocker.ContainerJSON, error){running, running, exited}}
	m := newManager(t, src)
	path := logPath(t)
	followToEnd(t, m, path, false)

	got := joinLines(readCRIFile(t, path))
	want := map[string][]string{"stdout": {"one", "three"}, "stderr": {"two"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("lines = %q, want %q", got, want)
	}
	calls := src.Calls()
	if len(calls) != 4 || !calls[2].Follow || calls[3].Follow {
		t.Fatalf("ContainerLogs calls = %+v, want 3 follows and a catch-up", calls)
	}
	if wantSince := fmt.Sprintf("%d.%09d", ms(2).Unix(), ms(2).Nanosecond()); calls[2].Since != wantSince {
		t.Fatalf("resumed with Since %q, want %q", calls[2].Since, wantSince)
	}
}

func TestCatchUpAfterFollowEnds(t *testing.T) {
	ms := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }
	// Docker's follow stream ended before the container's unterminated last message.
	src := &fakeSource{results: []func(context.Context) (io.ReadCloser, error){
		canned(muxStream(message{stdoutID, ms(1), "one\n"})),
		canned(muxStream(message{stdoutID, ms(1), "one\n"}, message{stdoutID, ms(2), "last words"})),
	}}
	m := newManager(t, src)
	path := logPath(t)
	followToEnd(t, m, path, false)
	got := joinLines(readCRIFile(t, path))
	if want := []string{"one", "last words<partial>"}; !reflect.DeepEqual(got["stdout"], want) {
		t.Fatalf("lines = %q, want stdout %q", got, want)
	}
}

// TestFollowAcrossDaemonRestart: Docker's follow stream ends when the daemon stops;
// with live-restore the container keeps running. The copier waits for the daemon
// (longer than its retry budget), sees the container running, and follows again after
// the last line copied: nothing is lost or repeated.
func TestFollowAcrossDaemonRestart(t *testing.T) {
	ms := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }
	states := []func() (libdocker.ContainerJSON, error){}
	for range 3 * defaultMaxRetries {
		states = append(states, unreachable)
	}
	states = append(states, running, exited)
	src := &fakeSource{results: []func(context.Context) (io.ReadCloser, error){
		canned(muxStream(message{stdoutID, ms(1), "1\n"}, message{stdoutID, ms(2), "2\n"})), // EOF: dockerd stops
		canned(muxStream(
			message{stdoutID, ms(2), "2\n"}, // since is inclusive: repeated
			message{stdoutID, ms(3), "3\n"}, // printed while the daemon was down
			message{stdoutID, ms(4), "4\n"},
		)),
		canned(nil), // the catch-up after the container exited
	}, states: states}
	m := newManager(t, src)
	path := logPath(t)
	followToEnd(t, m, path, false)
	if got, want := joinLines(readCRIFile(t, path))["stdout"], []string{"1", "2", "3", "4"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("lines = %q, want %q", got, want)
	}
	if n := followCalls(src); n != 2 {
		t.Fatalf("follow calls = %d, want 2 (the second after the daemon came back)", n)
	}
	if n, want := src.Inspects(), len(states); n != want {
		t.Fatalf("InspectContainer calls = %d, want %d", n, want)
	}
}

// TestFollowEndsWhenContainerExits: a stream ending with the container exited is
// caught up once and not followed again; a removed container stops the copier.
func TestFollowEndsWhenContainerExits(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		state   func() (libdocker.ContainerJSON, error)
		catchUp bool
	}{
		{desc: "exited", state: exited, catchUp: true},
		{desc: "removed", state: func() (libdocker.ContainerJSON, error) {
			return libdocker.ContainerJSON{}, fmt.Errorf("fake: %w", libdocker.ErrNotFound)
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			src := &fakeSource{results: []func(context.Context) (io.ReadCloser, error){canned(nil)},
				states: []func() (libdocker.ContainerJSON, error){tc.state}}
			m := newManager(t, src)
			followToEnd(t, m, logPath(t), false)
			calls := src.Calls()
			if n := followCalls(src); n != 1 {
				t.Fatalf("follow calls = %d, want 1", n)
			}
			if got := len(calls) == 2 && !calls[1].Follow; got != tc.catchUp {
				t.Fatalf("calls %+v: catch-up %v, want %v", calls, got, tc.catchUp)
			}
		})
	}
}

func followCalls(src *fakeSource) int {
	n := 0
	for _, c := range src.Calls() {
		if c.Follow {
			n++
		}
	}
	return n
}

func TestRetryBounded(t *testing.T) {
	src := &fakeSource{results: []func(context.Context) (io.ReadCloser, error){broken(nil)},
		states: []func() (libdocker.ContainerJSON, error){running}}
	m := newManager(t, src)
	followToEnd(t, m, logPath(t), false)
	if n, want := len(src.Calls()), m.maxRetries+1; n != want {
		t.Fatalf("ContainerLogs called %d times, want %d", n, want)
	}
}

func TestFollowCancelled(t *testing.T) {
	pr, _ := io.Pipe()
	src := &fakeSource{results: []func(context.Context) (io.ReadCloser, error){
		func(context.Context) (io.ReadCloser, error) { return pr, nil },
	}}
	m := newManager(t, src)
	ctx, cancel := context.WithCancel(context.Background())
	m.Follow(ctx, "c1", logPath(t), false)
	waitFor(t, "ContainerLogs call", func() bool { return len(src.Calls()) == 1 })
	cancel()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := m.Wait(wctx, "c1"); err != nil {
		t.Fatalf("Wait after cancelling the run context: %v", err)
	}
}
