package containerlog

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// countingWriter records each Write call.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

func TestWriterFormat(t *testing.T) {
	ts := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("CEST", 2*3600))
	x := func(n int) string { return strings.Repeat("x", n) }
	type want struct {
		partial bool
		content string
	}
	for _, tc := range []struct {
		desc    string
		stream  string
		content string
		partial bool
		want    []want
	}{
		{desc: "full line", stream: "stdout", content: "hello world", want: []want{{false, "hello world"}}},
		{desc: "stderr partial", stream: "stderr", content: "part", partial: true, want: []want{{true, "part"}}},
		{desc: "empty full line", stream: "stdout", content: "", want: []want{{false, ""}}},
		{desc: "empty partial writes nothing", stream: "stdout", content: "", partial: true},
		{desc: "trailing newline dropped", stream: "stdout", content: "line\n", want: []want{{false, "line"}}},
		{desc: "trailing newline beats partial", stream: "stdout", content: "line\n", partial: true, want: []want{{false, "line"}}},
		{desc: "lone newline", stream: "stdout", content: "\n", want: []want{{false, ""}}},
		{desc: "embedded newlines", stream: "stdout", content: "a\n\nb", partial: true,
			want: []want{{false, "a"}, {false, ""}, {true, "b"}}},
		{desc: "spaces and tabs kept", stream: "stdout", content: "  a \tb ", want: []want{{false, "  a \tb "}}},
		{desc: "exactly 16KiB", stream: "stdout", content: x(MaxEntrySize), want: []want{{false, x(MaxEntrySize)}}},
		{desc: "16KiB plus one", stream: "stdout", content: x(MaxEntrySize + 1),
			want: []want{{true, x(MaxEntrySize)}, {false, "x"}}},
		{desc: "40000 bytes partial", stream: "stderr", content: x(40000), partial: true,
			want: []want{{true, x(MaxEntrySize)}, {true, x(MaxEntrySize)}, {true, x(40000 - 2*MaxEntrySize)}}},
		{desc: "long line then short", stream: "stdout", content: x(MaxEntrySize+5) + "\nshort",
			want: []want{{true, x(MaxEntrySize)}, {false, x(5)}, {false, "short"}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var buf countingWriter
			w := NewWriter(&buf)
			if err := w.WriteEntry(ts, tc.stream, []byte(tc.content), tc.partial); err != nil {
				t.Fatalf("WriteEntry: %v", err)
			}
			if len(tc.want) > 0 && buf.writes != 1 {
				t.Errorf("WriteEntry made %d Write calls, want 1", buf.writes)
			}
			got := parseCRI(t, buf.Bytes())
			if len(got) != len(tc.want) {
				t.Fatalf("got %d entries, want %d: %q", len(got), len(tc.want), buf.String())
			}
			for i, e := range got {
				if !e.ts.Equal(ts) || e.stream != tc.stream {
					t.Errorf("entry %d: ts %v stream %s, want %v %s", i, e.ts, e.stream, ts, tc.stream)
				}
				if e.partial != tc.want[i].partial || e.content != tc.want[i].content {
					t.Errorf("entry %d: partial=%v content=%.20q (len %d), want partial=%v len %d",
						i, e.partial, e.content, len(e.content), tc.want[i].partial, len(tc.want[i].content))
				}
			}
		})
	}
}

func TestWriterExactBytes(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	ts := time.Date(2024, 1, 2, 3, 4, 5, 600000000, time.UTC)
	if err := w.WriteEntry(ts, StreamStdout, []byte("hi"), false); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteEntry(ts.Add(time.Nanosecond), StreamStderr, []byte("part"), true); err != nil {
		t.Fatal(err)
	}
	want := "2024-01-02T03:04:05.6Z stdout F hi\n2024-01-02T03:04:05.600000001Z stderr P part\n"
	if buf.String() != want {
		t.Fatalf("got %q, want %q", buf.String(), want)
	}
}

func TestWriterRejectsBadStream(t *testing.T) {
	var buf bytes.Buffer
	if err := NewWriter(&buf).WriteEntry(time.Now(), "stdin", []byte("x"), false); err == nil {
		t.Fatal("WriteEntry accepted stream stdin")
	}
	if buf.Len() != 0 {
		t.Fatalf("wrote %q for a bad stream", buf.String())
	}
}

func BenchmarkWriteEntry(b *testing.B) {
	for _, bc := range []struct {
		desc string
		size int
	}{
		{desc: "80B", size: 80},
		{desc: "4KiB", size: 4 << 10},
		{desc: "64KiB", size: 64 << 10},
	} {
		b.Run(bc.desc, func(b *testing.B) {
			var buf bytes.Buffer
			w := NewWriter(&buf)
			content := bytes.Repeat([]byte("a"), bc.size)
			ts := time.Now()
			b.SetBytes(int64(bc.size))
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				if err := w.WriteEntry(ts, StreamStdout, content, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
