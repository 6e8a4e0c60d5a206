// Package waitfor polls a condition in tests. Tests only.
package waitfor

import (
	"testing"
	"time"
)

// Timeout is how long Condition waits.
const Timeout = 5 * time.Second

// Condition polls cond every millisecond and fails the test when it is still
// false after Timeout.
func Condition(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", Timeout)
		}
		time.Sleep(time.Millisecond)
	}
}
