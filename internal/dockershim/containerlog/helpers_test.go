package containerlog

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// criLine is one parsed line of a CRI log file.
type criLine struct {
	ts      time.Time
	stream  string
	partial bool
	content string
}

// criLineRE is the test's own, strict reading of the CRI log format.
var criLineRE = regexp.MustCompile(`^(\S+) (stdout|stderr) ([FP]) (.*)$`)

// parseCRI parses CRI log content, failing the test on any malformed line.
func parseCRI(t testing.TB, data []byte) []criLine {
	t.Helper()
	var out []criLine
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("CRI log does not end with a newline: %q", tailOf(data))
	}
	// Split on '\n' only: bufio.ScanLines would drop a '\r' that belongs to the content.
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if len(data) == 0 {
			break
		}
		m := criLineRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("malformed CRI log line %q", line)
		}
		ts, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Fatalf("bad timestamp in CRI log line %q: %v", line, err)
		}
		if len(m[4]) > MaxEntrySize {
			t.Fatalf("CRI log entry carries %d bytes, more than %d", len(m[4]), MaxEntrySize)
		}
		out = append(out, criLine{ts: ts, stream: m[2], partial: m[3] == "P", content: m[4]})
	}
	return out
}

func tailOf(b []byte) []byte { return b[max(0, len(b)-80):] }

func readCRIFile(t testing.TB, path string) []criLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read CRI log: %v", err)
	}
	return parseCRI(t, data)
}

// joinLines reassembles P...F entries into lines per stream, the way the kubelet reads
// them. An unterminated trailing P run is returned with a "<partial>" suffix.
func joinLines(entries []criLine) map[string][]string {
	out := map[string][]string{}
	pending := map[string]string{}
	for _, e := range entries {
		pending[e.stream] += e.content
		if !e.partial {
			out[e.stream] = append(out[e.stream], pending[e.stream])
			delete(pending, e.stream)
		}
	}
	for s, p := range pending {
		out[s] = append(out[s], p+"<partial>")
	}
	return out
}

// dockerTS formats ts the way Docker prefixes log messages.
func dockerTS(ts time.Time) string { return ts.UTC().Format("2006-01-02T15:04:05.000000000Z07:00") }

// frame builds one multiplexed frame: [stream,0,0,0,size(be32)] + payload.
func frame(stream byte, payload string) []byte {
	h := make([]byte, 8, 8+len(payload))
	h[0] = stream
	binary.BigEndian.PutUint32(h[4:], uint32(len(payload)))
	return append(h, payload...)
}

// message is one Docker log message for building canned streams.
type message struct {
	stream byte // 1 stdout, 2 stderr
	ts     time.Time
	line   string // with '\n' unless partial
}

func muxStream(msgs ...message) []byte {
	var b []byte
	for _, m := range msgs {
		b = append(b, frame(m.stream, dockerTS(m.ts)+" "+m.line)...)
	}
	return b
}

func rawStream(msgs ...message) []byte {
	var b []byte
	for _, m := range msgs {
		b = append(b, dockerTS(m.ts)+" "+m.line...)
	}
	return b
}

// fakeSource answers ContainerLogs with canned results, one per call; the last one
// repeats. It records the options of every call. InspectContainer answers with
// states the same way; without states the container has exited.
type fakeSource struct {
	mu       sync.Mutex
	calls    []libdocker.LogsOptions
	results  []func(ctx context.Context) (io.ReadCloser, error)
	states   []func() (libdocker.ContainerJSON, error)
	inspects int
}

func (f *fakeSource) InspectContainer(_ context.Context, id string) (libdocker.ContainerJSON, error) {
	f.mu.Lock()
	n := f.inspects
	f.inspects++
	f.mu.Unlock()
	if len(f.states) == 0 {
		return exited()
	}
	return f.states[min(n, len(f.states)-1)]()
}

func (f *fakeSource) Inspects() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inspects
}

func running() (libdocker.ContainerJSON, error) { return stateJSON(true), nil }
func exited() (libdocker.ContainerJSON, error)  { return stateJSON(false), nil }

func stateJSON(running bool) libdocker.ContainerJSON {
	var j libdocker.ContainerJSON
	if err := json.Unmarshal(fmt.Appendf(nil, `{"State":{"Running":%t}}`, running), &j); err != nil {
		panic(err)
	}
	return j
}

// unreachable is the daemon being down.
func unreachable() (libdocker.ContainerJSON, error) {
	return libdocker.ContainerJSON{}, errors.New("Cannot connect to the Docker daemon: connection refused")
}

func (f *fakeSource) ContainerLogs(ctx context.Context, id string, opts libdocker.LogsOptions) (io.ReadCloser, error) {
	f.mu.Lock()
	n := len(f.calls)
	f.calls = append(f.calls, opts)
	r := f.results[min(n, len(f.results)-1)]
	f.mu.Unlock()
	return r(ctx)
}

func (f *fakeSource) Calls() []libdocker.LogsOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]libdocker.LogsOptions(nil), f.calls...)
}

func canned(data []byte) func(context.Context) (io.ReadCloser, error) {
	return func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}
}

// broken yields data, then fails with a non-EOF error.
func broken(data []byte) func(context.Context) (io.ReadCloser, error) {
	return func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(io.MultiReader(bytes.NewReader(data), errReader{})), nil
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

func failing(err error) func(context.Context) (io.ReadCloser, error) {
	return func(context.Context) (io.ReadCloser, error) { return nil, err }
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func fileContains(path, s string) func() bool {
	return func() bool {
		b, err := os.ReadFile(path)
		return err == nil && strings.Contains(string(b), s)
	}
}
