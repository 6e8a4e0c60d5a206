// Command pause is the sandbox ("infra") process of a pod: the dockershim runs
// it as the only process of the sandbox container, whose namespaces the pod's
// other containers join.
//
// It blocks until SIGINT or SIGTERM and then exits 0. When the pod shares one
// PID namespace, pause is that namespace's PID 1: orphaned processes are
// re-parented to it, so it reaps every exited child on SIGCHLD to keep zombies
// from piling up.
//
// It is packaged into the pause image by scripts/build-images.sh and must stay
// static:
//
//	CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' ./internal/pause
//
// No package imports this one.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(run())
}

// run waits for a termination signal while reaping children, and returns the
// process exit code.
func run() int {
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)

	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "pause: waiting for SIGINT or SIGTERM (not PID 1 of a PID namespace)")
	}
	// Children that exited before the handler was installed sent a SIGCHLD
	// nobody saw: reap them now.
	reapChildren()

	for sig := range signals {
		if sig == syscall.SIGCHLD {
			reapChildren()
			continue
		}
		return 0
	}
	return 0
}

// reapChildren collects the exit status of every child that has exited,
// without blocking. Several children may exit per delivered SIGCHLD (signals
// coalesce), hence the loop until no exited child is left.
func reapChildren() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			// ECHILD: no children at all; pid 0: none has exited yet.
			return
		}
	}
}
