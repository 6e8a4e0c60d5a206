// Package cmdtest holds what the test fixtures that run outside commands
// (node containers, virtual machines, the control plane) share: a random
// suffix for the names of what they create, argument lists shortened and
// output tails for error messages, and FatalOf to test how a fixture fails.
// Tests only.
package cmdtest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// Suffix returns 8 random hex digits, so that fixtures of tests on a shared
// host never collide.
func Suffix(t testing.TB) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// Summarize is args joined by spaces, cut after max of them ("...").
func Summarize(args []string, max int) string {
	if len(args) > max {
		return strings.Join(args[:max], " ") + " ..."
	}
	return strings.Join(args, " ")
}

// LastLines is the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// FatalOf runs fn with a testing.TB whose Fatal and Fatalf end fn's goroutine
// and keep the message instead of failing t, and returns that message ("" when
// fn did not fail): the test of a fixture's failures.
func FatalOf(t testing.TB, fn func(tb testing.TB)) string {
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(rec)
	}()
	<-done
	return rec.msg
}

type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *fatalRecorder) Fatal(args ...any) {
	r.msg = fmt.Sprint(args...)
	runtime.Goexit()
}
