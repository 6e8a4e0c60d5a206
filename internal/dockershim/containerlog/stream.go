package containerlog

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"time"
)

// Docker's log stream, with timestamps on, prefixes every message with
// "<RFC3339Nano timestamp with 9 fraction digits> ". A message is one line ending in
// '\n', or a piece of a longer line (Docker's log copier cuts lines at 16 KiB, the
// pieces sharing one timestamp) or the output's unterminated end, both without '\n'.
const (
	// dockerTimestampLen is the length of Docker's fixed-width timestamp,
	// e.g. 2024-05-06T07:08:09.123456789Z.
	dockerTimestampLen = len("2006-01-02T15:04:05.000000000Z")
	// maxTimestampLen bounds the search for the space after a timestamp (a zone
	// offset instead of Z makes it longer).
	maxTimestampLen = len("2006-01-02T15:04:05.000000000+00:00")
	// dockerSplitSize is where Docker's log copier cuts long lines.
	dockerSplitSize = 16 * 1024
)

// emitFunc receives one message: its timestamp, its content without the newline, and
// whether it lacked the newline (partial).
type emitFunc func(ts time.Time, content []byte, partial bool) error

// cutTimestamp splits "<timestamp> <rest>" and reports whether b starts that way.
func cutTimestamp(b []byte) (time.Time, []byte, bool) {
	i := bytes.IndexByte(b[:min(len(b), maxTimestampLen+1)], ' ')
	if i < 0 {
		return time.Time{}, b, false
	}
	ts, err := time.Parse(time.RFC3339Nano, string(b[:i]))
	if err != nil {
		return time.Time{}, b, false
	}
	return ts, b[i+1:], true
}

// messageSink receives one stream of a demultiplexed Docker log stream. The
// demultiplexer writes one frame per Write, and Docker sends one message per frame, so
// a Write's content not ending in '\n' is a partial message.
type messageSink struct {
	emit   emitFunc
	lastTS time.Time // for content without a timestamp (not expected from Docker)
}

func (s *messageSink) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		ts, rest, ok := cutTimestamp(p)
		if ok {
			s.lastTS = ts
		} else if s.lastTS.IsZero() {
			s.lastTS = time.Now()
		}
		line, after, full := bytes.Cut(rest, []byte{'\n'})
		if err := s.emit(s.lastTS, line, !full); err != nil {
			return 0, err
		}
		p = after
	}
	return n, nil
}

// copyRaw reads a TTY container's raw log stream, in which message boundaries are not
// marked: a message ends at '\n', or after Docker's 16 KiB split size when a timestamp
// follows. It returns nil at EOF.
func copyRaw(r io.Reader, emit emitFunc) error {
	br := bufio.NewReaderSize(r, 64*1024)
	var ts time.Time
	content := make([]byte, 0, dockerSplitSize)
	needTS := true
	for {
		if needTS {
			t, err := readTimestamp(br)
			if err != nil {
				return eofIsNil(err)
			}
			if !t.IsZero() {
				ts = t
			} else if ts.IsZero() {
				ts = time.Now()
			}
		}
		var full bool
		var err error
		content, full, err = readContent(br, content[:0])
		if len(content) > 0 || full {
			if eerr := emit(ts, content, !full); eerr != nil {
				return eerr
			}
		}
		if err != nil {
			return eofIsNil(err)
		}
		needTS = full || startsWithTimestamp(br)
	}
}

func eofIsNil(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// readTimestamp consumes a leading "<timestamp> " and returns it, or returns the zero
// time and consumes nothing when the stream does not start with one.
func readTimestamp(br *bufio.Reader) (time.Time, error) {
	head, err := br.Peek(maxTimestampLen + 1)
	if len(head) == 0 {
		return time.Time{}, err
	}
	ts, rest, ok := cutTimestamp(head)
	if !ok {
		return time.Time{}, nil
	}
	_, err = br.Discard(len(head) - len(rest))
	return ts, err
}

// startsWithTimestamp reports whether the next bytes are a Docker timestamp and a space.
func startsWithTimestamp(br *bufio.Reader) bool {
	head, _ := br.Peek(dockerTimestampLen + 1)
	if len(head) < dockerTimestampLen+1 || head[dockerTimestampLen] != ' ' {
		return false
	}
	_, err := time.Parse(time.RFC3339Nano, string(head[:dockerTimestampLen]))
	return err == nil
}

// readContent appends to buf the bytes up to the next '\n' (consumed, not appended) or
// up to dockerSplitSize bytes, whichever comes first. full reports the newline.
func readContent(br *bufio.Reader, buf []byte) ([]byte, bool, error) {
	for len(buf) < dockerSplitSize {
		if _, err := br.Peek(1); err != nil {
			return buf, false, err
		}
		chunk, _ := br.Peek(min(br.Buffered(), dockerSplitSize-len(buf)))
		if i := bytes.IndexByte(chunk, '\n'); i >= 0 {
			buf = append(buf, chunk[:i]...)
			_, err := br.Discard(i + 1)
			return buf, true, err
		}
		buf = append(buf, chunk...)
		if _, err := br.Discard(len(chunk)); err != nil {
			return buf, false, err
		}
	}
	return buf, false, nil
}
