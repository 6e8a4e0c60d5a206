//go:build linux

package streaming

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	remotecommand "k8s.io/cri-streaming/pkg/streaming/remotecommand"
)

func TestIntegrationExec(t *testing.T) {
	d := testDocker(t)
	id := sleeper(t)
	for _, tc := range []struct {
		desc       string
		cmd        []string
		stdin      string
		tty        bool
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{desc: "stdout, stderr and exit code", cmd: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, wantCode: 3, wantStdout: "out\n", wantStderr: "err\n"},
		{desc: "success", cmd: []string{"true"}},
		{desc: "stdin reaches the process", cmd: []string{"cat"}, stdin: "abc", wantStdout: "abc"},
		{desc: "tty merges stderr into stdout", cmd: []string{"sh", "-c", "echo o; echo e >&2"}, tty: true, wantStdout: "o\r\ne\r\n"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			p := ExecParams{ContainerID: id, Cmd: tc.cmd, Stdout: &stdout, Stderr: &stderr, TTY: tc.tty, Timeout: 20 * time.Second}
			if tc.stdin != "" {
				p.Stdin = strings.NewReader(tc.stdin)
			}
			code, err := Exec(t.Context(), d, p)
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			if code != tc.wantCode || stdout.String() != tc.wantStdout || stderr.String() != tc.wantStderr {
				t.Fatalf("Exec = %d, stdout %q, stderr %q; want %d, %q, %q", code, stdout.String(), stderr.String(), tc.wantCode, tc.wantStdout, tc.wantStderr)
			}
		})
	}
}

func TestIntegrationExecResize(t *testing.T) {
	d := testDocker(t)
	id := sleeper(t)
	sizes := make(chan remotecommand.TerminalSize, 1)
	sizes <- remotecommand.TerminalSize{Width: 100, Height: 40}
	var stdout bytes.Buffer
	code, err := Exec(t.Context(), d, ExecParams{
		ContainerID: id,
		// The resize reaches the terminal once Docker started the exec: wait
		// for it (up to 15 s) rather than a fixed time.
		Cmd:     []string{"sh", "-c", `i=0; while [ "$(stty size 2>/dev/null)" != "40 100" ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i+1)); done; stty size`},
		Stdout:  &stdout,
		TTY:     true,
		Resize:  sizes,
		Timeout: 20 * time.Second,
	})
	if err != nil || code != 0 {
		t.Fatalf("Exec = %d, %v", code, err)
	}
	if got := strings.TrimSpace(stdout.String()); got != "40 100" {
		t.Fatalf("stty size = %q; want %q", got, "40 100")
	}
}

func TestIntegrationExecKilled(t *testing.T) {
	d := testDocker(t)
	id := sleeper(t)
	for _, tc := range []struct {
		desc    string
		timeout time.Duration
		cancel  time.Duration
		want    error
	}{
		{desc: "timeout", timeout: 300 * time.Millisecond, want: ErrExecTimeout},
		{desc: "context cancelled", cancel: 300 * time.Millisecond, want: context.Canceled},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.cancel > 0 {
				time.AfterFunc(tc.cancel, cancel)
			}
			start := time.Now()
			code, err := Exec(ctx, d, ExecParams{ContainerID: id, Cmd: []string{"sleep", "1000"}, Timeout: tc.timeout})
			elapsed := time.Since(start)
			if !errors.Is(err, tc.want) || code != -1 {
				t.Fatalf("Exec = %d, %v; want -1 and %v", code, err, tc.want)
			}
			if elapsed > 15*time.Second { // a few Docker round trips after 300ms
				t.Fatalf("Exec returned after %s; want promptly after 300ms", elapsed)
			}
			waitNoProcess(t, id, "sleep 1000")
		})
	}
}

// waitNoProcess fails unless no process of the container shows pattern within 3s.
func waitNoProcess(t *testing.T, id, pattern string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		ps, err := dockerCLI(t, nil, "exec", id, "ps")
		if err != nil {
			t.Fatalf("ps in container: %v", err)
		}
		if !strings.Contains(ps, pattern) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q still runs in the container:\n%s", pattern, ps)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func BenchmarkIntegrationExec(b *testing.B) {
	d := testDocker(b)
	id := sleeper(b)
	ctx := context.Background()
	for b.Loop() {
		code, err := Exec(ctx, d, ExecParams{ContainerID: id, Cmd: []string{"true"}, Timeout: 20 * time.Second})
		if err != nil || code != 0 {
			b.Fatalf("Exec = %d, %v", code, err)
		}
	}
}
