//go:build linux

package streaming

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// dialTimeout bounds a connect inside a pod's network namespace.
const dialTimeout = 10 * time.Second

type dialResult struct {
	conn net.Conn
	err  error
}

// dialInNetns connects to 127.0.0.1:port inside the network namespace of process
// pid. The socket is created inside that namespace and stays there.
func dialInNetns(ctx context.Context, pid int, port int32) (net.Conn, error) {
	nsPath := "/proc/" + strconv.Itoa(pid) + "/ns/net"
	target, err := os.Open(nsPath)
	if err != nil {
		return nil, fmt.Errorf("open network namespace: %w", err)
	}
	defer target.Close()
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
	res := make(chan dialResult, 1)
	// A dedicated goroutine: if the thread cannot return to its namespace, the
	// goroutine exits while still locked and the runtime discards the thread.
	go func() {
		defer logging.HandleCrash(nil, "port-forward dial")
		res <- dialFromNetns(ctx, int(target.Fd()), addr)
	}()
	r := <-res
	if r.err != nil {
		return nil, fmt.Errorf("dial %s in %s: %w", addr, nsPath, r.err)
	}
	return r.conn, nil
}

// dialFromNetns switches the calling OS thread into the namespace targetFd, dials
// addr and switches back. It must run on a goroutine of its own: on a failed switch
// back it leaves the thread locked so that it is never reused.
func dialFromNetns(ctx context.Context, targetFd int, addr string) dialResult {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return dialResult{err: fmt.Errorf("open current network namespace: %w", err)}
	}
	defer orig.Close()
	if err := unix.Setns(targetFd, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return dialResult{err: fmt.Errorf("enter network namespace: %w", err)}
	}
	var d net.Dialer
	conn, dialErr := d.DialContext(ctx, "tcp4", addr)
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// Keep the thread locked: it is still in the pod's namespace.
		if conn != nil {
			conn.Close()
		}
		return dialResult{err: fmt.Errorf("restore network namespace: %w", err)}
	}
	runtime.UnlockOSThread()
	return dialResult{conn: conn, err: dialErr}
}
