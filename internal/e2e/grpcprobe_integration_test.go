//go:build linux

package e2e

import (
	"fmt"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
)

// TestIntegrationGRPCProbe (issue 30 item 10): gRPC probes against a real
// gRPC health server (grpc-go's, run by the test on 127.0.0.1) that a
// host-network pod's probes reach at its pod IP (--node-ip=127.0.0.1): the
// readiness probe asks the default service, the liveness probe service
// "live". The pod is ready while the default service is SERVING, not ready
// once it is NOT_SERVING (the liveness probe's service staying SERVING: no
// restart), and ready again after.
func TestIntegrationGRPCProbe(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("live", healthpb.HealthCheckResponse_SERVING)
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	port := lis.Addr().(*net.TCPAddr).Port

	n := newNode(t)
	n.extra = append(n.extra, "--node-ip=127.0.0.1")
	n.start()
	n.writeManifest("grpc.yaml", manifest("grpc", fmt.Sprintf(`  hostNetwork: true
  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: Never
    command: [sleep, "3600"]
    readinessProbe: {grpc: {port: %[1]d}, periodSeconds: 1, failureThreshold: 1}
    livenessProbe: {grpc: {port: %[1]d, service: live}, periodSeconds: 1, timeoutSeconds: 5, failureThreshold: 3}
`, port)))
	n.waitPod("grpc", podStartTimeout, "ready (default service SERVING)", runningAndReady)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	p := n.waitPod("grpc", podStartTimeout, "not ready (default service NOT_SERVING)", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodRunning && podCondition(p, v1.ContainersReady) == v1.ConditionFalse
	})
	if c := containerStatus(p, "app"); c == nil || c.RestartCount != 0 || c.State.Running == nil {
		t.Errorf("app %+v: the liveness service is SERVING, want running without a restart", c)
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	n.waitPod("grpc", podStartTimeout, "ready again", runningAndReady)
}
