package volumes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap/zaptest"
)

var tsDirRE = regexp.MustCompile(`^\.\.\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}\.\d+$`)

func newWriter(t *testing.T) *atomicWriter {
	t.Helper()
	return &atomicWriter{dir: t.TempDir(), logger: zaptest.NewLogger(t)}
}

func files(kv ...string) map[string]fileProjection {
	out := map[string]fileProjection{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = fileProjection{Data: []byte(kv[i+1]), Mode: 0o644}
	}
	return out
}

// sameNames compares a listDir result with the expected names in any order.
func sameNames(got []string, want ...string) bool {
	sort.Strings(want)
	return strings.Join(got, " ") == strings.Join(want, " ")
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func TestAtomicWriterLayout(t *testing.T) {
	t.Parallel()
	w := newWriter(t)
	if err := w.Write(files("name", "web", "sub/dir/labels", "a=b"), nil); err != nil {
		t.Fatal(err)
	}
	data, err := os.Readlink(filepath.Join(w.dir, "..data"))
	if err != nil {
		t.Fatal(err)
	}
	if !tsDirRE.MatchString(data) {
		t.Errorf("..data -> %q, want a timestamped dir like ..2024_01_01_00_00_00.123456789", data)
	}
	if fi, err := os.Stat(filepath.Join(w.dir, data)); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("data dir mode %v (%v), want 0755", fi.Mode(), err)
	}
	for name, target := range map[string]string{"name": "..data/name", "sub": "..data/sub"} {
		got, err := os.Readlink(filepath.Join(w.dir, name))
		if err != nil || got != target {
			t.Errorf("%s -> %q (%v), want %q", name, got, err, target)
		}
	}
	if got := listDir(t, w.dir); !sameNames(got, "..data", data, "name", "sub") {
		t.Errorf("dir holds %v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(w.dir, "sub/dir/labels")); string(b) != "a=b" {
		t.Errorf("nested file %q", b)
	}
}

func TestAtomicWriterUpdate(t *testing.T) {
	t.Parallel()
	w := newWriter(t)
	if err := w.Write(files("keep", "1", "gone", "x", "nested/gone", "y"), nil); err != nil {
		t.Fatal(err)
	}
	first, _ := os.Readlink(filepath.Join(w.dir, "..data"))

	// No change, no new directory.
	if err := w.Write(files("keep", "1", "gone", "x", "nested/gone", "y"), nil); err != nil {
		t.Fatal(err)
	}
	if d, _ := os.Readlink(filepath.Join(w.dir, "..data")); d != first {
		t.Fatalf("no-op write moved ..data to %s", d)
	}

	// Content change plus removals.
	if err := w.Write(files("keep", "2"), nil); err != nil {
		t.Fatal(err)
	}
	second, _ := os.Readlink(filepath.Join(w.dir, "..data"))
	if second == first {
		t.Fatal("..data did not move")
	}
	if got := listDir(t, w.dir); !sameNames(got, "..data", second, "keep") {
		t.Errorf("after update dir holds %v (old data dir and vanished names must go)", got)
	}
	if b, _ := os.ReadFile(filepath.Join(w.dir, "keep")); string(b) != "2" {
		t.Errorf("keep = %q", b)
	}

	// A mode change alone is an update.
	p := files("keep", "2")
	p["keep"] = fileProjection{Data: []byte("2"), Mode: 0o600}
	if err := w.Write(p, nil); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(w.dir, "keep")); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v after mode-only update", fi.Mode().Perm())
	}
}

func TestAtomicWriterFailureKeepsOldState(t *testing.T) {
	t.Parallel()
	w := newWriter(t)
	if err := w.Write(files("a", "old"), nil); err != nil {
		t.Fatal(err)
	}
	before := listDir(t, w.dir)
	boom := errors.New("boom")
	err := w.Write(files("a", "new", "b", "new"), func(string) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if after := listDir(t, w.dir); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Errorf("failed write changed the dir: %v -> %v", before, after)
	}
	if b, _ := os.ReadFile(filepath.Join(w.dir, "a")); string(b) != "old" {
		t.Errorf("a = %q", b)
	}
}

func TestAtomicWriterRemovesStaleDirs(t *testing.T) {
	t.Parallel()
	w := newWriter(t)
	// Left behind by a crash between steps.
	for _, stale := range []string{"..2020_01_01_00_00_00.111", "..data_tmp"} {
		if stale == "..data_tmp" {
			if err := os.Symlink("..2020_01_01_00_00_00.111", filepath.Join(w.dir, stale)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.Mkdir(filepath.Join(w.dir, stale), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Write(files("a", "1"), nil); err != nil {
		t.Fatal(err)
	}
	data, _ := os.Readlink(filepath.Join(w.dir, "..data"))
	if got := listDir(t, w.dir); !sameNames(got, "..data", data, "a") {
		t.Errorf("dir holds %v", got)
	}
}

func TestValidatePath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path    string
		wantErr bool
	}{
		{path: "a"},
		{path: "a/b/c"},
		{path: "a..b"},
		{path: "./a"},
		{path: ""},
		{path: "/abs", wantErr: true},
		{path: "a/../b", wantErr: true},
		{path: "..", wantErr: true},
		{path: "..data", wantErr: true},
		{path: "..a/b", wantErr: true},
		{path: strings.Repeat("x", 256), wantErr: true},
		{path: strings.Repeat("x/", 2049), wantErr: true},
	} {
		t.Run(fmt.Sprintf("%.20q", tc.path), func(t *testing.T) {
			t.Parallel()
			err := validatePath(tc.path)
			wantErr := tc.wantErr || tc.path == ""
			if (err != nil) != wantErr {
				t.Errorf("validatePath(%q) = %v, wantErr %v", tc.path, err, wantErr)
			}
		})
	}
}

// Readers that resolve ..data once always see one complete version, and the visible
// files always hold some complete version, while the writer keeps updating.
func TestAtomicWriterConcurrentReaders(t *testing.T) {
	t.Parallel()
	w := newWriter(t)
	version := func(i int) map[string]fileProjection {
		v := fmt.Sprint(i)
		return files("a", "a"+v, "b", "b"+v, "sub/c", "c"+v)
	}
	if err := w.Write(version(0), nil); err != nil {
		t.Fatal(err)
	}
	const updates = 200
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var problems []string
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 10 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				ts, err := os.Readlink(filepath.Join(w.dir, "..data"))
				if err != nil {
					report("readlink ..data: %v", err)
					continue
				}
				var got []string
				for _, name := range []string{"a", "b", "sub/c"} {
					b, err := os.ReadFile(filepath.Join(w.dir, ts, name))
					if errors.Is(err, os.ErrNotExist) {
						got = nil // that version was replaced and removed meanwhile
						break
					}
					if err != nil {
						report("read %s: %v", name, err)
					}
					got = append(got, string(b))
				}
				if got != nil && (got[0][1:] != got[1][1:] || got[1][1:] != got[2][1:]) {
					report("mixed versions in one data dir: %v", got)
				}
				if b, err := os.ReadFile(filepath.Join(w.dir, "a")); err == nil && (len(b) < 2 || b[0] != 'a') {
					report("visible file a holds %q", b)
				}
			}
		}()
	}
	for i := 1; i <= updates; i++ {
		if err := w.Write(version(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	for _, p := range problems {
		t.Error(p)
	}
	if b, _ := os.ReadFile(filepath.Join(w.dir, "sub/c")); string(b) != fmt.Sprint("c", updates) {
		t.Errorf("final sub/c = %q", b)
	}
	if n := len(listDir(t, w.dir)); n != 5 { // ..data, one ts dir, a, b, sub
		t.Errorf("%d entries left, want 5: %v", n, listDir(t, w.dir))
	}
}
