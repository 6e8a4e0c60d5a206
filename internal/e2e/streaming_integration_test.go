//go:build linux

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/streamtest"
)

// TestIntegrationShimStreaming drives the streaming server of a shim-only
// instance the way crictl does: stream URLs from the CRI Exec, Attach and
// PortForward RPCs, then client-go's SPDY executor and port forwarder on them.
func TestIntegrationShimStreaming(t *testing.T) {
	n := newNode(t)
	rt := startStreamingShim(t, n)
	podID, ctrID := runHTTPDPod(t, n, rt)

	t.Run("exec", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		resp, err := rt.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: ctrID,
			Cmd: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, Stdout: true, Stderr: true})
		if err != nil {
			t.Fatalf("Exec: %v", err)
		}
		var stdout, stderr bytes.Buffer
		err = spdyExecutor(t, resp.Url).StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
		if got := streamtest.ExitStatus(t, err); got != 3 {
			t.Fatalf("exit code = %d; want 3", got)
		}
		if stdout.String() != "out\n" || stderr.String() != "err\n" {
			t.Fatalf("stdout %q, stderr %q; want %q, %q", stdout.String(), stderr.String(), "out\n", "err\n")
		}
	})

	t.Run("attach", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		resp, err := rt.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: ctrID, Stdin: true, Stdout: true, Stderr: true})
		if err != nil {
			t.Fatalf("Attach: %v", err)
		}
		stdinR, stdinW := io.Pipe()
		defer stdinW.Close()
		stdout := streamtest.NewBuffer()
		streamDone := make(chan error, 1)
		exec := spdyExecutor(t, resp.Url)
		go func() {
			streamDone <- exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdinR, Stdout: stdout, Stderr: io.Discard})
		}()
		if _, err := stdinW.Write([]byte("hi\n")); err != nil {
			t.Fatalf("write stdin: %v", err)
		}
		stdout.WaitFor(t, "hi", 10*time.Second)
		cancel()
		select {
		case <-streamDone:
		case <-time.After(10 * time.Second):
			t.Fatal("attach client did not return after cancel")
		}
	})

	t.Run("port-forward", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		resp, err := rt.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: podID, Port: []int32{8080}})
		if err != nil {
			t.Fatalf("PortForward: %v", err)
		}
		local := forwardPort(t, resp.Url, 8080)
		for i := range 2 { // each connection is a new stream pair
			reply := rawHTTPGet(t, "127.0.0.1:"+strconv.Itoa(local), "/index.html")
			if !strings.HasPrefix(reply, "HTTP/1.") || !strings.Contains(reply, "hello-pf") {
				t.Fatalf("request %d through port-forward: reply %q; want an HTTP reply with %q", i, reply, "hello-pf")
			}
		}
	})
}

// startStreamingShim starts a shim-only instance of the binary on the node's
// directories (streaming server on 127.0.0.1) and returns a CRI client on it.
func startStreamingShim(t *testing.T, n *node) runtimeapi.RuntimeServiceClient {
	t.Helper()
	sock := filepath.Join(n.dir, "shim.sock")
	shim, err := startProc("dockershim", filepath.Join(n.dir, "shim.log"), n.s.bin,
		"--experimental-dockershim",
		"--container-runtime-endpoint=unix://"+sock,
		"--docker-endpoint="+n.s.docker,
		"--experimental-dockershim-root-directory="+n.shimRoot,
		"--cni-conf-dir="+n.cniConf,
		"--cni-bin-dir="+cniBinDir,
		"--cni-cache-dir="+n.cniCache,
		"--pod-infra-container-image="+pauseImage,
		"--streaming-address=127.0.0.1",
		"-v=4", "--logging-format=json")
	if err != nil {
		t.Fatal(err)
	}
	n.procs = append(n.procs, shim)
	n.teardown = append(n.teardown, func() {
		if err := shim.stop(30 * time.Second); err != nil {
			t.Errorf("the shim-only instance after SIGTERM: %v", err)
		}
	})
	waitSocket(t, sock, shim, 30*time.Second)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc client: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return runtimeapi.NewRuntimeServiceClient(conn)
}

// runHTTPDPod runs a sandbox with one busybox container that serves
// /tmp/www/index.html on :8080 and echoes its stdin with cat. The sandbox is
// removed through the CRI at test end, before the shim stops.
func runHTTPDPod(t *testing.T, n *node, rt runtimeapi.RuntimeServiceClient) (podID, ctrID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	podCfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "stream-" + n.id, Namespace: n.ns, Uid: "uid-" + n.id},
		Hostname: "stream-" + n.id,
	}
	pod, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podCfg})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	podID = pod.PodSandboxId
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: podID}); err != nil {
			t.Errorf("StopPodSandbox: %v", err)
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: podID}); err != nil {
			t.Errorf("RemovePodSandbox: %v", err)
		}
	})
	ctr, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: podID,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "httpd"},
			Image:    &runtimeapi.ImageSpec{Image: busyboxImage},
			Command: []string{"sh", "-c",
				"mkdir -p /tmp/www && echo hello-pf > /tmp/www/index.html && httpd -p 8080 -h /tmp/www && cat"},
			Stdin: true,
		},
		SandboxConfig: podCfg,
	})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	ctrID = ctr.ContainerId
	if _, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: ctrID}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	waitHTTPD(ctx, t, rt, ctrID)
	return podID, ctrID
}

// waitHTTPD waits until httpd answers inside the container (ExecSync runs wget).
func waitHTTPD(ctx context.Context, t *testing.T, rt runtimeapi.RuntimeServiceClient, id string) {
	t.Helper()
	var last string
	for {
		resp, err := rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id,
			Cmd: []string{"wget", "-q", "-O", "-", "http://127.0.0.1:8080/index.html"}, Timeout: 5})
		if err == nil && resp.ExitCode == 0 && strings.Contains(string(resp.Stdout), "hello-pf") {
			return
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("exit %d: %s%s", resp.ExitCode, resp.Stdout, resp.Stderr)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("httpd not ready: %s", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// clientConfig is the config crictl uses for stream URLs.
func clientConfig() *rest.Config {
	return &rest.Config{TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
}

// spdyExecutor builds a remotecommand client for a stream URL, as crictl does.
func spdyExecutor(t *testing.T, rawURL string) remotecommand.Executor {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("parse URL %q: %v", rawURL, err)
	}
	e, err := remotecommand.NewSPDYExecutor(clientConfig(), http.MethodPost, u)
	if err != nil {
		t.Fatalf("NewSPDYExecutor: %v", err)
	}
	return e
}

// forwardPort starts a client-go port forwarder (as crictl does) from a kernel-chosen
// local port on 127.0.0.1 to remote, and returns the local port.
func forwardPort(t *testing.T, rawURL string, remote int) int {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("parse URL %q: %v", rawURL, err)
	}
	transport, upgrader, err := spdy.RoundTripperFor(clientConfig())
	if err != nil {
		t.Fatalf("RoundTripperFor: %v", err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	stop, ready := make(chan struct{}), make(chan struct{})
	var errOut bytes.Buffer
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", remote)}, stop, ready, io.Discard, &errOut)
	if err != nil {
		t.Fatalf("portforward.New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	t.Cleanup(func() {
		close(stop)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("port forwarder did not stop")
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("ForwardPorts: %v (%s)", err, errOut.String())
	case <-time.After(10 * time.Second):
		t.Fatal("port forwarder not ready after 10s")
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("GetPorts = %v, %v", ports, err)
	}
	return int(ports[0].Local)
}

// rawHTTPGet sends a minimal HTTP/1.0 request for path to addr and returns the raw reply.
func rawHTTPGet(t *testing.T, addr, path string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.0\r\n\r\n"); err != nil {
		t.Fatalf("write request: %v", err)
	}
	reply, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("read reply: %v", err)
	}
	return string(reply)
}
