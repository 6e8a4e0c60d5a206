package nodecontainer

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// A node container has its own network namespace, and the control plane
// listens on the host's 127.0.0.1 only. For each LoopbackPorts port the test
// process listens on a unix socket in a host directory bound into the node
// at loopbackDir and relays each connection to the host's 127.0.0.1:port;
// inside, systemd-socket-proxyd (socket-activated on the node's
// 127.0.0.1:port) relays to that socket. Nothing listens on an address other
// than loopback, and a kubeconfig naming https://127.0.0.1:port works in the
// node as on the host (the API server's certificate names 127.0.0.1).

// loopbackDir is where the node sees the relay sockets.
const loopbackDir = "/var/lib/kds-loopback"

// serveLoopback listens on <dir>/<port>.sock for each port, relaying to the
// host's 127.0.0.1:port until the test ends, and returns dir.
func serveLoopback(t testing.TB, ports []int) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kds-loopback")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var listeners []net.Listener
	t.Cleanup(func() {
		for _, l := range listeners {
			l.Close()
		}
		wg.Wait()
		os.RemoveAll(dir)
	})
	for _, port := range ports {
		l, err := net.Listen("unix", filepath.Join(dir, strconv.Itoa(port)+".sock"))
		if err != nil {
			t.Fatal(err)
		}
		listeners = append(listeners, l)
		target := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		wg.Go(func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go relay(c, target)
			}
		})
	}
	return dir
}

// relay copies between c and a new connection to target until either ends.
func relay(c net.Conn, target string) {
	defer c.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// proxyLoopback starts the node's relay for port: a socket unit's worth of
// systemd-socket-activate on 127.0.0.1:port handing the listener to
// systemd-socket-proxyd, which connects to the port's socket.
func (n *Node) proxyLoopback(t testing.TB, port int) {
	t.Helper()
	out, err := n.Exec(t, "systemd-run", fmt.Sprintf("--unit=kds-loopback-%d", port), "--",
		"/usr/bin/systemd-socket-activate", "-l", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		"/lib/systemd/systemd-socket-proxyd", filepath.Join(loopbackDir, strconv.Itoa(port)+".sock"))
	if err != nil {
		t.Fatalf("relay 127.0.0.1:%d in node %s: %v: %s", port, n.Name, err, out)
	}
}
