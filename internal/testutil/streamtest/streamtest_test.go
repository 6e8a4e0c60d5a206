package streamtest

import (
	"fmt"
	"testing"
	"time"

	utilexec "k8s.io/utils/exec"
)

func TestExitStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		err  error
		want int
	}{
		{desc: "nil is 0", want: 0},
		{desc: "exit error", err: utilexec.CodeExitError{Err: fmt.Errorf("exit 3"), Code: 3}, want: 3},
		{desc: "wrapped exit error", err: fmt.Errorf("stream: %w", utilexec.CodeExitError{Err: fmt.Errorf("exit 7"), Code: 7}), want: 7},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := ExitStatus(t, tc.err); got != tc.want {
				t.Errorf("ExitStatus = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestBufferWaitFor(t *testing.T) {
	t.Parallel()
	b := NewBuffer()
	go func() {
		for _, s := range []string{"he", "llo ", "world"} {
			time.Sleep(10 * time.Millisecond)
			_, _ = b.Write([]byte(s))
		}
	}()
	b.WaitFor(t, "lo wor", 10*time.Second)
	b.WaitFor(t, "world", 10*time.Second)
	if got := b.String(); got != "hello world" {
		t.Errorf("String = %q", got)
	}
}
