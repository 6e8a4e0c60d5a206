//go:build linux

package nodestatus

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// flakyProxy forwards TCP connections from a fixed 127.0.0.1 port to the API
// server and can cut the network: down closes the listener and every open
// connection, up listens on the same port again.
type flakyProxy struct {
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newFlakyProxy(t *testing.T, target string) *flakyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &flakyProxy{target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	_ = ln.Close()
	t.Cleanup(func() {
		p.down()
		p.wg.Wait()
	})
	return p
}

func (p *flakyProxy) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("proxy listen %s: %v", p.addr, err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.forward(c)
			}()
		}
	}()
}

func (p *flakyProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *flakyProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *flakyProxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *flakyProxy) forward(in net.Conn) {
	defer func() { _ = in.Close() }()
	out, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	defer func() { _ = out.Close() }()
	if !p.track(in) || !p.track(out) {
		return
	}
	defer p.untrack(in)
	defer p.untrack(out)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done
}

// TestIntegrationNetworkOutage runs the controller through a proxy to the real
// API server: registration backs off while the network is down and succeeds
// when it is back; a later outage fails status updates and Lease renewals
// (OnRepeatedHeartbeatFailure fires) and both resume afterwards.
func TestIntegrationNetworkOutage(t *testing.T) {
	t.Parallel()
	c := shared.Get(t)
	u, err := url.Parse(c.APIServer)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newFlakyProxy(t, u.Host)
	name := "it-outage"
	var failures atomic.Int32
	client := nodeClientFor(t, c, name, "https://"+proxy.addr)
	ctl := startControllerWith(t, c, client, Options{NodeName: name, StatusReportFrequency: 2 * time.Second,
		OnRepeatedHeartbeatFailure: func() { failures.Add(1) }})

	time.Sleep(2 * time.Second) // several registration attempts fail
	if ctl.Registered() {
		t.Fatal("registered with the network down")
	}
	proxy.up(t)
	node := waitNode(t, c, name, 30*time.Second, "Ready=True", readyIs(v1.ConditionTrue))
	// The Node is Ready from its create; the lease loop makes the Lease after.
	var lease *coordinationv1.Lease
	waitUntil(t, 20*time.Second, "the node's Lease", func() bool {
		lease, err = c.Client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil
	})

	proxy.down()
	// Status updates and lease renewals fail.
	waitUntil(t, 20*time.Second, "OnRepeatedHeartbeatFailure during the outage", func() bool { return failures.Load() > 0 })
	cut := time.Now()
	proxy.up(t)
	hb := condition(node, v1.NodeReady).LastHeartbeatTime
	waitNode(t, c, name, 20*time.Second, "a heartbeat after the outage", func(n *v1.Node) bool {
		r := condition(n, v1.NodeReady)
		return r.Status == v1.ConditionTrue && r.LastHeartbeatTime.After(hb.Time) && !r.LastHeartbeatTime.Time.Before(cut.Truncate(time.Second))
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		l, err := c.Client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(cut) && l.UID == lease.UID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease not renewed after the outage: %+v, %v", l, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitUntil polls cond every 100ms for up to d and fails the test after.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, d)
		}
	}
}
