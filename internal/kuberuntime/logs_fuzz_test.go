package kuberuntime

import (
	"bytes"
	"testing"
)

// FuzzParseLogLine: any log line (CRI or Docker json-file) parses or is an
// error, never a panic; parsed content is part of the line.
func FuzzParseLogLine(f *testing.F) {
	for _, seed := range []string{
		"2026-11-26T06:00:00.123456789Z stdout F hello\n",
		"2026-11-26T06:00:00Z stderr P part",
		"2026-11-26T06:00:00Z stdout F:x \n",
		`{"log":"hi\n","stream":"stdout","time":"2026-11-26T06:00:00.1Z"}` + "\n",
		`{"log":1}`, "no timestamp", "2026-13-99T00:00:00Z stdout F x\n", "",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		msg, err := parseLogLine(line)
		if err != nil || line[0] == '{' {
			return
		}
		if len(msg.content) > 0 && !bytes.Contains(line, msg.content) {
			t.Fatalf("content %q is not part of the line %q", msg.content, line)
		}
	})
}
