package containerlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"
)

const (
	// tailBlock is how much of the file's end LastTimestamp reads at a time. One
	// entry is at most MaxEntrySize content plus a short header, so one block
	// normally suffices.
	tailBlock = 32 * 1024
	// maxTailScan bounds how far back LastTimestamp looks for a parseable entry.
	maxTailScan = 1 << 20
)

// LastTimestamp returns the timestamp of the last complete (newline-terminated,
// parseable) entry of the CRI log at path, or the zero time when the file is missing or
// holds no such entry. It reads only the end of the file (one 32 KiB block, unless the
// last entry is longer). Docker logs stdout and stderr messages from two goroutines, so
// consecutive entries of different streams can be out of timestamp order by a few
// microseconds; LastTimestamp therefore returns the latest timestamp among the complete
// entries of the block it read, the point after which nothing has been copied.
func LastTimestamp(path string) (time.Time, error) {
	f, err := os.Open(path)
	return lastTimestampOf(f, err, path)
}

// lastTimestampIn is LastTimestamp of the file name in d. It does not block
// on a FIFO.
func lastTimestampIn(d *logDir, name string) (time.Time, error) {
	f, err := d.open(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	return lastTimestampOf(f, err, name)
}

// lastTimestampOf is LastTimestamp of f, the result (with err) of opening path.
func lastTimestampOf(f *os.File, err error, path string) (time.Time, error) {
	if errors.Is(err, os.ErrNotExist) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("containerlog: open %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return time.Time{}, fmt.Errorf("containerlog: stat %s: %w", path, err)
	}
	ts, err := lastTimestamp(f, fi.Size())
	if err != nil {
		return time.Time{}, fmt.Errorf("containerlog: %s: %w", path, err)
	}
	return ts, nil
}

// lastTimestamp reads r backwards from size in blocks until it finds the last complete
// entry that parses.
func lastTimestamp(r io.ReaderAt, size int64) (time.Time, error) {
	var buf []byte // the file's bytes [off, size)
	off := size
	for {
		ts, found, needMore := lastEntryIn(buf, off == 0)
		if found {
			return ts, nil
		}
		if !needMore || off == 0 {
			return time.Time{}, nil
		}
		if size-off >= maxTailScan {
			return time.Time{}, fmt.Errorf("no parseable entry in the last %d bytes", size-off)
		}
		n := min(int64(tailBlock), off)
		off -= n
		grown := make([]byte, int(n)+len(buf))
		if _, err := r.ReadAt(grown[:n], off); err != nil {
			return time.Time{}, fmt.Errorf("read at %d: %w", off, err)
		}
		copy(grown[n:], buf)
		buf = grown
	}
}

// lastEntryIn returns the latest timestamp of the complete entries in buf, the tail of
// a file; atStart says buf begins at the start of the file. It reports needMore when
// buf holds no complete parseable entry but an earlier part of the file could.
func lastEntryIn(buf []byte, atStart bool) (ts time.Time, found, needMore bool) {
	end := bytes.LastIndexByte(buf, '\n') // the last complete line ends here
	for end >= 0 {
		start := bytes.LastIndexByte(buf[:end], '\n') + 1
		if start == 0 && !atStart {
			break // this line may begin before buf
		}
		if e, ok := parseEntry(buf[start:end]); ok {
			if !found || e.ts.After(ts) {
				ts = e.ts
			}
			found = true
		}
		end = start - 1
	}
	return ts, found, !found && !atStart
}

// entry is one parsed CRI log line.
type entry struct {
	ts      time.Time
	stream  string
	partial bool
	content []byte
}

// parseEntry parses one CRI log line without its newline.
func parseEntry(line []byte) (entry, bool) {
	tsb, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return entry{}, false
	}
	ts, err := time.Parse(timeFormat, string(tsb))
	if err != nil {
		return entry{}, false
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok || (string(stream) != StreamStdout && string(stream) != StreamStderr) {
		return entry{}, false
	}
	tags, content, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return entry{}, false
	}
	tag, _, _ := bytes.Cut(tags, []byte{':'})
	if string(tag) != TagFull && string(tag) != TagPartial {
		return entry{}, false
	}
	return entry{ts: ts, stream: string(stream), partial: string(tag) == TagPartial, content: content}, true
}

// completeLength returns the length of f up to and including its last newline, reading
// only its end; bytes after it are an entry cut short by a crash.
func completeLength(r io.ReaderAt, size int64) (int64, error) {
	off := size
	buf := make([]byte, tailBlock)
	for off > 0 {
		n := min(int64(tailBlock), off)
		off -= n
		if _, err := r.ReadAt(buf[:n], off); err != nil {
			return 0, fmt.Errorf("read at %d: %w", off, err)
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return off + int64(i) + 1, nil
		}
		if size-off >= maxTailScan {
			return size, nil // not a CRI log we wrote; leave it alone
		}
	}
	return 0, nil
}

// resumePoint is the timestamp after which a copier writing the file name in
// d resumes: the last timestamp in it, or, when it holds no entry (the kubelet
// has just rotated it), the newest last timestamp of its uncompressed rotated
// siblings (name.*).
func resumePoint(d *logDir, name string) (time.Time, error) {
	ts, err := lastTimestampIn(d, name)
	if err != nil || !ts.IsZero() {
		return ts, err
	}
	siblings, err := d.names()
	if err != nil {
		return time.Time{}, fmt.Errorf("containerlog: list rotated files of %s: %w", name, err)
	}
	for _, s := range siblings {
		if !strings.HasPrefix(s, name+".") || strings.HasSuffix(s, ".gz") || strings.HasSuffix(s, ".tmp") {
			continue
		}
		t, err := lastTimestampIn(d, s)
		if err == nil && t.After(ts) {
			ts = t
		}
	}
	return ts, nil
}
