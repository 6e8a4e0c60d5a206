package containerlog

import (
	"bytes"
	"fmt"
	"io"
	"time"
)

// CRI log format constants.
const (
	// StreamStdout and StreamStderr are the stream names of a CRI log entry.
	StreamStdout = "stdout"
	StreamStderr = "stderr"

	// TagPartial marks an entry continued by the next entry of the same stream;
	// TagFull marks the last (or only) entry of a line.
	TagPartial = "P"
	TagFull    = "F"

	// MaxEntrySize is the most content bytes one entry carries; longer content is
	// split into several entries, all but the last tagged P.
	MaxEntrySize = 16 * 1024

	// timeFormat is the timestamp format of an entry (what containerd writes and the
	// kubelet parses).
	timeFormat = time.RFC3339Nano
)

// Writer formats CRI log entries onto an io.Writer, one Write call per WriteEntry so
// that an entry (or the group of entries one call produces) reaches an O_APPEND file in
// one piece. A Writer is not safe for concurrent use.
type Writer struct {
	w   io.Writer
	buf []byte
}

// NewWriter returns a Writer that writes entries to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteEntry writes content as CRI log entries
//
//	<RFC3339Nano timestamp> <stream> <F|P> <content>\n
//
// stream is "stdout" or "stderr". A trailing newline of content is dropped (it ends the
// line); any other newline ends an F entry. partial tags the last piece P (the line
// continues in a later call), unless content ended with a newline. Pieces longer than
// MaxEntrySize are split into several entries tagged P except the last. Empty content
// with partial set writes nothing.
func (w *Writer) WriteEntry(ts time.Time, stream string, content []byte, partial bool) error {
	if stream != StreamStdout && stream != StreamStderr {
		return fmt.Errorf("containerlog: invalid stream %q", stream)
	}
	if n := len(content); n > 0 && content[n-1] == '\n' {
		content = content[:n-1]
		partial = false
	}
	if len(content) == 0 && partial {
		return nil
	}
	prefix := ts.UTC().AppendFormat(w.buf[:0], timeFormat)
	prefix = append(prefix, ' ')
	prefix = append(prefix, stream...)
	prefix = append(prefix, ' ')
	plen := len(prefix)
	buf := prefix // entries are appended after the prefix, which is reused for each
	for {
		line, rest, more := bytes.Cut(content, []byte{'\n'})
		lastPartial := partial && !more
		for {
			chunk := line
			if len(chunk) > MaxEntrySize {
				chunk = chunk[:MaxEntrySize]
			}
			line = line[len(chunk):]
			tag := TagFull
			if len(line) > 0 || lastPartial {
				tag = TagPartial
			}
			buf = appendEntry(buf, prefix, tag, chunk)
			if len(line) == 0 {
				break
			}
		}
		if !more {
			break
		}
		content = rest
	}
	w.buf = buf[:0]
	if _, err := w.w.Write(buf[plen:]); err != nil {
		return fmt.Errorf("containerlog: write entry: %w", err)
	}
	return nil
}

// appendEntry appends one formatted entry to buf. prefix is "<ts> <stream> ".
func appendEntry(buf, prefix []byte, tag string, content []byte) []byte {
	buf = append(buf, prefix...)
	buf = append(buf, tag...)
	buf = append(buf, ' ')
	buf = append(buf, content...)
	return append(buf, '\n')
}
