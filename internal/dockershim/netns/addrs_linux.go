package netns

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// GlobalAddrs returns the global-scope addresses of interface ifName inside
// the network namespace at nsPath (for example /proc/<pid>/ns/net), IPv4
// first, as `ip -o addr show dev <ifName> scope global` lists them (what
// cri-dockerd and the 1.23 dockershim report as the pod IP). No process is
// run: a goroutine of its own enters the namespace on its locked thread,
// reads the interface over netlink and returns. A thread that cannot return
// to its namespace is never reused: its goroutine ends with it still locked,
// and the runtime then ends the thread; the caller's thread is never moved.
func GlobalAddrs(nsPath, ifName string) ([]string, error) {
	type result struct {
		addrs []string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		defer logging.HandleCrash(nil, "pod addresses")
		addrs, err := globalAddrs(nsPath, ifName)
		done <- result{addrs, err}
	}()
	r := <-done
	return r.addrs, r.err
}

// globalAddrs is GlobalAddrs on the calling goroutine, which it leaves
// locked to its thread when the thread cannot return to its namespace.
func globalAddrs(nsPath, ifName string) ([]string, error) {
	target, err := os.Open(nsPath)
	if err != nil {
		return nil, fmt.Errorf("open network namespace: %w", err)
	}
	defer target.Close()
	runtime.LockOSThread()
	own, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("open own network namespace: %w", err)
	}
	defer own.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("enter network namespace %s: %w", nsPath, err)
	}
	addrs, readErr := interfaceAddrs(ifName)
	if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, errors.Join(readErr, fmt.Errorf("return from network namespace %s: %w", nsPath, err))
	}
	runtime.UnlockOSThread()
	if readErr != nil {
		return nil, fmt.Errorf("network namespace %s: %w", nsPath, readErr)
	}
	return addrs, nil
}

// interfaceAddrs lists ifName's global unicast addresses, IPv4 first.
func interfaceAddrs(ifName string) ([]string, error) {
	iface, err := net.InterfaceByName(ifName)
	if err != nil {
		return nil, err
	}
	as, err := iface.Addrs()
	if err != nil {
		return nil, fmt.Errorf("addresses of %s: %w", ifName, err)
	}
	var v4, v6 []string
	for _, a := range as {
		n, ok := a.(*net.IPNet)
		if !ok || !n.IP.IsGlobalUnicast() {
			continue
		}
		if n.IP.To4() != nil {
			v4 = append(v4, n.IP.String())
		} else {
			v6 = append(v6, n.IP.String())
		}
	}
	return append(v4, v6...), nil
}
