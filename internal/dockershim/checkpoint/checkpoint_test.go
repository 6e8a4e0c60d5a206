package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func newStore(t testing.TB) *Store {
	t.Helper()
	s, err := New(filepath.Join(t.TempDir(), "checkpoints"))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func sample(id string) *PodSandbox {
	return &PodSandbox{
		ID:          id,
		Name:        "web",
		Namespace:   "default",
		UID:         "0b6f3c1e-uid",
		HostNetwork: false,
		PortMappings: []PortMapping{
			{Protocol: "tcp", ContainerPort: 80, HostPort: 8080},
			{Protocol: "udp", ContainerPort: 53, HostPort: 5353, HostIP: "127.0.0.1"},
		},
		IPs:          []string{"10.88.0.5", "fd00::5"},
		NetworkSetUp: true,
		CreatedAt:    time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC),
	}
}

func TestNewCreatesDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	if _, err := New(dir); err != nil {
		t.Fatalf("New: %v", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatalf("stat: %v", err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode = %v, want directory 0700", fi.Mode())
	}
	if _, err := New(""); err == nil {
		t.Fatal("New(\"\") succeeded")
	}
}

func TestRoundTrip(t *testing.T) {
	s := newStore(t)
	want := sample("abc123")
	if err := s.Write(want); err != nil {
		t.Fatalf("Write: %v", err)
	}
	got, err := s.Read("abc123")
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Read = %+v, want %+v", got, want)
	}

	// Overwrite and read back the new state.
	want.NetworkSetUp = false
	want.IPs = nil
	if err := s.Write(want); err != nil {
		t.Fatalf("second Write: %v", err)
	}
	got, err = s.Read("abc123")
	if err != nil {
		t.Fatalf("Read after overwrite: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Read after overwrite = %+v, want %+v", got, want)
	}
	fi, err := os.Stat(filepath.Join(s.dir, "abc123"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		t.Fatalf("checkpoint file mode %v is group/other accessible", fi.Mode())
	}
}

func TestFileFormat(t *testing.T) {
	s := newStore(t)
	if err := s.Write(sample("fmt1")); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(s.dir, "fmt1"))
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("file is not JSON: %v", err)
	}
	for _, k := range []string{"version", "data", "checksum"} {
		if _, ok := env[k]; !ok {
			t.Errorf("file lacks key %q: %s", k, raw)
		}
	}
	if string(env["version"]) != `"v1"` {
		t.Errorf("version = %s, want \"v1\"", env["version"])
	}
	var data map[string]any
	if err := json.Unmarshal(env["data"], &data); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "name", "namespace", "uid", "host_network", "port_mappings", "ips", "network_set_up", "created_at"} {
		if _, ok := data[k]; !ok {
			t.Errorf("data lacks key %q: %s", k, env["data"])
		}
	}
	if want := `"` + checksum(env["data"]) + `"`; string(env["checksum"]) != want {
		t.Errorf("checksum = %s, want %s", env["checksum"], want)
	}
}

func TestReadErrors(t *testing.T) {
	valid := func(t *testing.T) []byte {
		s := newStore(t)
		if err := s.Write(sample("x1")); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(s.dir, "x1"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		desc    string
		content func(t *testing.T) []byte // nil: no file
		want    error
		detail  string
	}{
		{desc: "missing file", want: ErrNotFound},
		{desc: "truncated file", want: ErrCorrupt, detail: "decode file", content: func(t *testing.T) []byte {
			b := valid(t)
			return b[:len(b)/2]
		}},
		{desc: "empty file", want: ErrCorrupt, content: func(*testing.T) []byte { return nil }},
		{desc: "checksum mismatch", want: ErrCorrupt, detail: "checksum mismatch", content: func(t *testing.T) []byte {
			return []byte(strings.Replace(string(valid(t)), `"name":"web"`, `"name":"wab"`, 1))
		}},
		{desc: "checksum altered", want: ErrCorrupt, detail: "checksum mismatch", content: func(t *testing.T) []byte {
			var env envelope
			if err := json.Unmarshal(valid(t), &env); err != nil {
				t.Fatal(err)
			}
			env.Checksum = strings.Repeat("0", 64)
			b, _ := json.Marshal(env)
			return b
		}},
		{desc: "unknown version", want: ErrCorrupt, detail: "unsupported version", content: func(t *testing.T) []byte {
			return []byte(strings.Replace(string(valid(t)), `"version":"v1"`, `"version":"v9"`, 1))
		}},
		{desc: "id mismatch", want: ErrCorrupt, detail: `holds id "other"`, content: func(t *testing.T) []byte {
			s := newStore(t)
			if err := s.Write(sample("other")); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(s.dir, "other"))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}},
		{desc: "reformatted data still verifies", content: func(t *testing.T) []byte {
			var env envelope
			if err := json.Unmarshal(valid(t), &env); err != nil {
				t.Fatal(err)
			}
			b, _ := json.MarshalIndent(map[string]any{"version": env.Version, "data": env.Data, "checksum": env.Checksum}, "", "  ")
			return b
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := newStore(t)
			if tc.content != nil {
				if err := os.WriteFile(filepath.Join(s.dir, "x1"), tc.content(t), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cp, err := s.Read("x1")
			if tc.want == nil {
				if err != nil || cp.ID != "x1" {
					t.Fatalf("Read = %+v, %v; want the checkpoint", cp, err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Read error = %v, want %v", err, tc.want)
			}
			if cp != nil {
				t.Fatalf("Read returned %+v with an error", cp)
			}
			if !strings.Contains(err.Error(), tc.detail) || !strings.Contains(err.Error(), "x1") {
				t.Fatalf("Read error %q lacks detail %q or the id", err, tc.detail)
			}
		})
	}
}

func TestDeleteIdempotent(t *testing.T) {
	s := newStore(t)
	if err := s.Write(sample("d1")); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := s.Delete("d1"); err != nil {
			t.Fatalf("Delete #%d: %v", i+1, err)
		}
	}
	if _, err := s.Read("d1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Read after Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete("never-written"); err != nil {
		t.Fatalf("Delete of a missing id: %v", err)
	}
}

func TestListIgnoresTempFiles(t *testing.T) {
	s := newStore(t)
	for _, id := range []string{"b2", "a1", "c3"} {
		if err := s.Write(sample(id)); err != nil {
			t.Fatal(err)
		}
	}
	// A leftover temp file from a crash mid-write, and a subdirectory.
	if err := os.WriteFile(filepath.Join(s.dir, tempPrefix+"d4-12345"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(s.dir, "subdir"), 0o700); err != nil {
		t.Fatal(err)
	}
	got, err := s.List()
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if want := []string{"a1", "b2", "c3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("List = %v, want %v", got, want)
	}
	if err := s.Delete("b2"); err != nil {
		t.Fatal(err)
	}
	got, err = s.List()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a1", "c3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("List after Delete = %v, want %v", got, want)
	}
}

func TestConcurrentWrites(t *testing.T) {
	s := newStore(t)
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n*4)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("sandbox-%02d", i)
			for j := range 4 {
				cp := sample(id)
				cp.Name = fmt.Sprintf("pod-%d-%d", i, j)
				if err := s.Write(cp); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Write: %v", err)
	}
	ids, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != n {
		t.Fatalf("List returned %d ids, want %d: %v", len(ids), n, ids)
	}
	for i := range n {
		id := fmt.Sprintf("sandbox-%02d", i)
		cp, err := s.Read(id)
		if err != nil {
			t.Fatalf("Read %s: %v", id, err)
		}
		if want := fmt.Sprintf("pod-%d-3", i); cp.Name != want {
			t.Errorf("Read %s: Name = %q, want %q", id, cp.Name, want)
		}
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != n {
		t.Fatalf("directory holds %d entries, want %d (temp files left behind?)", len(entries), n)
	}
}

func TestBadIDsRejected(t *testing.T) {
	s := newStore(t)
	for _, tc := range []struct {
		desc string
		id   string
	}{
		{desc: "empty", id: ""},
		{desc: "slash", id: "a/b"},
		{desc: "backslash", id: `a\b`},
		{desc: "dotdot", id: ".."},
		{desc: "dotdot inside", id: "a..b"},
		{desc: "escape", id: "../../etc/passwd"},
		{desc: "leading dot", id: ".hidden"},
		{desc: "single dot", id: "."},
		{desc: "NUL", id: "a\x00b"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			check := func(op string, err error) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s(%q) succeeded", op, tc.id)
				}
				if errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt) {
					t.Fatalf("%s(%q) = %v, want a validation error", op, tc.id, err)
				}
				if !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.id)) && tc.id != "" {
					t.Fatalf("%s(%q) error %q does not name the id", op, tc.id, err)
				}
			}
			check("Write", s.Write(sample(tc.id)))
			_, err := s.Read(tc.id)
			check("Read", err)
			check("Delete", s.Delete(tc.id))
		})
	}
	if err := s.Write(nil); err == nil {
		t.Fatal("Write(nil) succeeded")
	}
}

func FuzzRead(f *testing.F) {
	s := newStore(f)
	if err := s.Write(sample("fuzz")); err != nil {
		f.Fatal(err)
	}
	valid, err := os.ReadFile(filepath.Join(s.dir, "fuzz"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add([]byte(`{"version":"v1","data":null,"checksum":""}`))
	f.Add([]byte(`{"version":"v1","data":"x","checksum":"74"}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, content []byte) {
		path := filepath.Join(s.dir, "fuzz")
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		cp, err := s.Read("fuzz")
		switch {
		case err == nil && (cp == nil || cp.ID != "fuzz"):
			t.Fatalf("Read = %+v without error, want id fuzz", cp)
		case err != nil && !errors.Is(err, ErrCorrupt):
			t.Fatalf("Read error %v does not wrap ErrCorrupt", err)
		}
	})
}

func BenchmarkWrite(b *testing.B) {
	s := newStore(b)
	cp := sample("bench")
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Write(cp); err != nil {
			b.Fatal(err)
		}
	}
}

// The temp files of writes that a crash cut short (kill -9 between write and
// rename) are removed when the store opens; the checkpoints are kept.
func TestNewRemovesTempFiles(t *testing.T) {
	dir := t.TempDir()
	s, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(sample("a1")); err != nil {
		t.Fatal(err)
	}
	temp := filepath.Join(dir, tempPrefix+"b2-1")
	if err := os.WriteFile(temp, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(temp); !os.IsNotExist(err) {
		t.Errorf("temp file kept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a1")); err != nil {
		t.Errorf("checkpoint removed: %v", err)
	}
}
