// Package cmdtest holds what the test fixtures that run outside commands
// (node containers, virtual machines) share: a random suffix for the names of
// what they create, and argument lists shortened for error messages. Tests
// only.
package cmdtest

import (
	"crypto/rand"
	"encoding/hex"
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
