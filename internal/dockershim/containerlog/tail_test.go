package containerlog

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var t0 = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

// criEntries formats n one-line entries at t0+i ms.
func criEntries(t testing.TB, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for i := range n {
		if err := w.WriteEntry(t0.Add(time.Duration(i)*time.Millisecond), StreamStdout, []byte("line"), false); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func writeFile(t testing.TB, content []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(p, content, 0o640); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLastTimestamp(t *testing.T) {
	ms := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }
	long := bytes.Repeat([]byte("y"), 3*tailBlock)
	for _, tc := range []struct {
		desc    string
		content []byte // nil: no file
		want    time.Time
	}{
		{desc: "missing file"},
		{desc: "empty file", content: []byte{}},
		{desc: "one entry", content: criEntries(t, 1), want: ms(0)},
		{desc: "many entries", content: criEntries(t, 1000), want: ms(999)},
		{desc: "incomplete last line ignored",
			content: append(criEntries(t, 3), "2030-01-01T00:00:00Z stdout F cut sh"...), want: ms(2)},
		{desc: "garbage last line skipped", content: append(criEntries(t, 3), "garbage\n"...), want: ms(2)},
		{desc: "only garbage", content: []byte("no timestamps\nhere\n")},
		{desc: "partial entry counts", content: []byte("2024-05-06T07:08:09.5Z stderr P half\n"),
			want: t0.Add(500 * time.Millisecond)},
		{desc: "entry longer than a tail block", content: append(append(criEntries(t, 2),
			"2024-05-06T07:08:10Z stdout F "...), append(long, '\n')...), want: t0.Add(time.Second)},
		{desc: "streams out of order: the latest wins", content: []byte(
			"2024-05-06T07:08:09.000002Z stdout F b\n2024-05-06T07:08:09.000001Z stderr F a\n"),
			want: t0.Add(2 * time.Microsecond)},
		{desc: "zone offset", content: []byte("2024-05-06T09:08:09.25+02:00 stdout F x\n"),
			want: t0.Add(250 * time.Millisecond)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "0.log")
			if tc.content != nil {
				p = writeFile(t, tc.content)
			}
			got, err := LastTimestamp(p)
			if err != nil {
				t.Fatalf("LastTimestamp: %v", err)
			}
			if !got.Equal(tc.want) {
				t.Fatalf("LastTimestamp = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLastTimestampGivesUpOnHugeGarbage(t *testing.T) {
	content := append(criEntries(t, 1), bytes.Repeat([]byte("no newline "), maxTailScan/5)...)
	content = append(content, '\n')
	if _, err := LastTimestamp(writeFile(t, content)); err == nil {
		t.Fatal("LastTimestamp found an entry beyond its scan limit")
	}
}

// countingReaderAt counts the bytes read through it.
type countingReaderAt struct {
	r io.ReaderAt
	n atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

func TestLastTimestampReadsTailOnly(t *testing.T) {
	// 20 MiB of entries (about 350k lines).
	var buf bytes.Buffer
	w := NewWriter(&buf)
	line := []byte(strings.Repeat("z", 40))
	for i := 0; buf.Len() < 20<<20; i++ {
		if err := w.WriteEntry(t0.Add(time.Duration(i)*time.Microsecond), StreamStderr, line, false); err != nil {
			t.Fatal(err)
		}
	}
	p := writeFile(t, buf.Bytes())
	want := parseCRI(t, tailOf(buf.Bytes())[bytes.IndexByte(tailOf(buf.Bytes()), '\n')+1:])[0].ts

	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cr := &countingReaderAt{r: f}
	got, err := lastTimestamp(cr, int64(buf.Len()))
	if err != nil {
		t.Fatalf("lastTimestamp: %v", err)
	}
	if !got.Equal(want) {
		t.Fatalf("lastTimestamp = %v, want %v", got, want)
	}
	if n := cr.n.Load(); n > tailBlock {
		t.Fatalf("read %d bytes of a %d byte file, want at most %d", n, buf.Len(), tailBlock)
	}

	// The public function on a sparse 4 GiB file answers at once.
	sparse := filepath.Join(t.TempDir(), "sparse.log")
	sf, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if err := sf.Truncate(4 << 30); err != nil {
		t.Fatal(err)
	}
	if _, err := sf.WriteAt([]byte("\n2024-05-06T07:08:09.000000042Z stdout F end\n"), 4<<30); err != nil {
		t.Fatal(err)
	}
	sf.Close()
	start := time.Now()
	got, err = LastTimestamp(sparse)
	if err != nil || !got.Equal(t0.Add(42)) {
		t.Fatalf("LastTimestamp(sparse) = %v, %v; want %v", got, err, t0.Add(42))
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("LastTimestamp on a 4 GiB file took %v", d)
	}
}

func TestTruncateIncomplete(t *testing.T) {
	complete := criEntries(t, 3)
	for _, tc := range []struct {
		desc    string
		content []byte
		want    []byte
	}{
		{desc: "complete file untouched", content: complete, want: complete},
		{desc: "cut entry removed", content: append(append([]byte{}, complete...), "2024-05-06T07:08:10Z std"...), want: complete},
		{desc: "no newline at all", content: []byte("2024-05-06T07"), want: []byte{}},
		{desc: "empty", content: []byte{}, want: []byte{}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p := writeFile(t, tc.content)
			if err := truncateIncomplete(openTestDir(t, filepath.Dir(p)), filepath.Base(p)); err != nil {
				t.Fatalf("truncateIncomplete: %v", err)
			}
			got, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("file = %q, want %q", tailOf(got), tailOf(tc.want))
			}
		})
	}
	if err := truncateIncomplete(openTestDir(t, t.TempDir()), "missing"); err != nil {
		t.Fatalf("truncateIncomplete(missing): %v", err)
	}
}

func TestResumePointAfterRotation(t *testing.T) {
	dir := t.TempDir()
	d := openTestDir(t, dir)
	write := func(name string, content []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	write("0.log.20240506-070809", criEntries(t, 5))
	write("0.log.20240506-060000.gz", []byte("\x1f\x8b not a log"))
	write("0.log", nil)
	got, err := resumePoint(d, "0.log")
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(4 * time.Millisecond); !got.Equal(want) {
		t.Fatalf("resumePoint with an empty current file = %v, want the rotated file's %v", got, want)
	}
	write("0.log", []byte("2024-05-06T07:08:09.000000007Z stdout F x\n"))
	if got, _ := resumePoint(d, "0.log"); !got.Equal(t0.Add(7)) {
		t.Fatalf("resumePoint = %v, want the current file's %v", got, t0.Add(7))
	}
}

// openTestDir opens dir as a log directory; it is closed when the test ends.
func openTestDir(t *testing.T, dir string) *logDir {
	t.Helper()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d, err := openLogDir(r, ".")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
