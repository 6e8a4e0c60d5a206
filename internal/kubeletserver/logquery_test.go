package kubeletserver

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeJournal knows the units it is given and records each journalctl run.
type fakeJournal struct {
	units string
	mu    sync.Mutex
	runs  [][]string
}

func (f *fakeJournal) Units(context.Context) (string, error) { return f.units, nil }

func (f *fakeJournal) Run(_ context.Context, args []string, w io.Writer) error {
	f.mu.Lock()
	f.runs = append(f.runs, args)
	f.mu.Unlock()
	_, err := fmt.Fprintf(w, "journal of %v\n", args)
	return err
}

// TestNodeLogQuery: with enableSystemLogQuery, /logs/?query= reads the
// journal of a service journald knows, with upstream's journalctl arguments,
// the log file of another, or one file; bad queries get upstream's codes and
// messages; without it, the query parameters are ignored.
func TestNodeLogQuery(t *testing.T) {
	t.Parallel()
	logDir := t.TempDir()
	for name, content := range map[string]string{"app.log": "app's own log\n", "sub/x.log": "x log\n", "kubelet": "not the journal\n"} {
		p := filepath.Join(logDir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	j := &fakeJournal{units: "docker.service\nkubelet.service\n"}
	opts := testAPIOptions(&fakeHost{})
	opts.LogDir, opts.SystemLogQuery, opts.journal = logDir, true, j
	h, err := NewAPIHandler(opts)
	if err != nil {
		t.Fatal(err)
	}
	base := "--utc --no-pager --output=short-precise"
	for _, tc := range []struct {
		desc, target string
		code         int
		body         string
	}{
		{"a journal service", "/logs/?query=kubelet", 200, "journal of [" + base + " --unit=kubelet]"},
		{"two services with options", "/logs/?query=kubelet&query=docker&tailLines=5&pattern=err.*&sinceTime=2026-11-30T10:00:00Z&untilTime=2026-11-30T11:05:09Z&boot=-1", 200,
			"journal of [" + base + " --since=2026-11-30 10:0:0 --until=2026-11-30 11:5:9 --pager-end --lines=5 --unit=kubelet --unit=docker --grep=err.* --boot -1]"},
		{"a service logging to a file", "/logs/?query=app", 200, "app's own log"},
		{"a file service with options", "/logs/?query=app&tailLines=3", 200, "options present and query resolved to log files for [app]\ntry without specifying options"},
		{"an unknown service", "/logs/?query=nothing", 200, "log not found for nothing"},
		{"one file", "/logs/?query=sub/x.log", 200, "x log"},
		{"a file with options", "/logs/?query=sub/x.log&tailLines=1", 406, "cannot specify file with options"},
		{"a missing file", "/logs/?query=sub/nope.log", 406, "no such file or directory"},
		{"an absolute path (os.Root, as upstream)", "/logs/?query=/sub/x.log", 406, "path escapes from parent"},
		{"a file out of the directory", "/logs/?query=../../etc/passwd", 406, "path escapes from parent"},
		{"two files", "/logs/?query=/a&query=/b", 406, "cannot specify more than one file"},
		{"a file and a service", "/logs/?query=sub/x.log&query=kubelet", 406, "cannot specify a file and service"},
		{"unsafe characters", "/logs/?query=kubelet%3Breboot", 406, `query: Invalid value: "kubelet;reboot": input contains unsupported characters`},
		{"five services", "/logs/?query=a&query=b&query=c&query=d&query=e", 406, "query: Too many: 5: must have at most 4 items"},
		{"an empty query", "/logs/?query=", 400, `query: Invalid value: [""]: may not be empty`},
		{"options without a query", "/logs/?tailLines=2", 406, "query: Required value: cannot be empty with options"},
		{"a bad time", "/logs/?query=kubelet&sinceTime=yesterday", 400, `sinceTime: Invalid value: "yesterday": invalid time format`},
		{"until before since", "/logs/?query=kubelet&sinceTime=2026-11-30T11:00:00Z&untilTime=2026-11-30T10:00:00Z", 406, "must be after `sinceTime`"},
		{"a later boot", "/logs/?query=kubelet&boot=1", 406, "boot: Invalid value: 1: must be less than 1"},
		{"too many lines", "/logs/?query=kubelet&tailLines=100001", 406, "tailLines: Invalid value: 100001: must be between 0 and 100000, inclusive"},
		{"a bad pattern", "/logs/?query=kubelet&pattern=(", 406, "pattern: Invalid value: \"(\": error parsing regexp: missing closing ): `(`"},
		{"a path in query mode", "/logs/sub/?query=kubelet", 406, "path not allowed in query mode"},
		{"a plain file, no query", "/logs/app.log", 200, "app's own log"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			rec := serveAPI(t, h, "GET", tc.target)
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.body) {
				t.Errorf("GET %s: %d %q; want %d with %q", tc.target, rec.Code, rec.Body.String(), tc.code, tc.body)
			}
		})
	}

	// gzip when asked for exactly so, as upstream.
	req := httptest.NewRequest("GET", "/logs/?query=kubelet", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	zr, err := gzip.NewReader(rec.Body)
	if err != nil || rec.Header().Get("Content-Encoding") != "gzip" || rec.Header().Get("Content-Type") != "text/plain;charset=UTF-8" {
		t.Fatalf("gzip: %v, headers %v", err, rec.Header())
	}
	if b, _ := io.ReadAll(zr); !strings.Contains(string(b), "--unit=kubelet") {
		t.Errorf("gzipped body %q", b)
	}

	// Without enableSystemLogQuery the parameters are ignored: the listing.
	opts.SystemLogQuery = false
	plain, err := NewAPIHandler(opts)
	if err != nil {
		t.Fatal(err)
	}
	if rec := serveAPI(t, plain, "GET", "/logs/?query=kubelet"); rec.Code != 200 || !strings.Contains(rec.Body.String(), "app.log") || strings.Contains(rec.Body.String(), "journal of") {
		t.Errorf("without the query: %d %q, want the directory listing", rec.Code, rec.Body.String())
	}
}
