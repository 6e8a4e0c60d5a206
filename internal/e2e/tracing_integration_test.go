//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// otlpReceiver is an OTLP/gRPC trace receiver: it keeps every span exported
// to it with its resource's attributes.
type otlpReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []receivedSpan
}

type receivedSpan struct {
	resource map[string]string
	span     *tracepb.Span
}

func (r *otlpReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		res := attrMap(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, receivedSpan{resource: res, span: s})
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (r *otlpReceiver) received() []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receivedSpan(nil), r.spans...)
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		out[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	return out
}

// TestIntegrationTracing runs a kubelet whose tracing configuration comes
// from a --config-dir drop-in, pointed at an OTLP/gRPC receiver of the test
// sampling every trace, and a static pod: the receiver gets upstream's
// syncPod span of the pod (its UID, name, namespace, "namespace/name" and
// update type "create", resource service.name kubelet and host.name the node)
// and the CRI RunPodSandbox and StartContainer client spans in the same trace.
func TestIntegrationTracing(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	recv := &otlpReceiver{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, recv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	n := newNode(t)
	dropins := filepath.Join(n.dir, "config.d")
	if err := os.MkdirAll(dropins, 0o755); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(lis.Addr().(*net.TCPAddr).Port)
	if err := os.WriteFile(filepath.Join(dropins, "10-tracing.conf"), []byte("apiVersion: kubelet.config.k8s.io/v1beta1\n"+
		"kind: KubeletConfiguration\ntracing:\n  endpoint: 127.0.0.1:"+port+"\n  samplingRatePerMillion: 1000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	roPort := freePort(t)
	n.extra = append(n.extra, "--config-dir="+dropins, "--read-only-port="+strconv.Itoa(roPort))
	n.start()
	n.writeManifest("traced.yaml", manifest("traced", `  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sleep", "3600"]
`))
	p := n.waitPod("traced", podStartTimeout, "running and ready", runningAndReady)

	// A request of the read-only API, with a caller's trace context: a root
	// span named by upstream's route (not in the caller's trace: upstream's
	// kubelet sets no propagator).
	const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(roPort)+"/pods", nil)
	req.Header.Set("traceparent", "00-"+callerTrace+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()

	var problems []string
	deadline := time.Now().Add(30 * time.Second) // the batch exporter sends every 5 s
	for {
		problems = traceProblems(recv.received(), p.Name, p.Namespace, string(p.UID), n.name)
		if !slices.ContainsFunc(recv.received(), func(s receivedSpan) bool {
			return s.span.GetName() == "/pods" && len(s.span.GetParentSpanId()) == 0 && fmt.Sprintf("%x", s.span.GetTraceId()) != callerTrace
		}) {
			problems = append(problems, "no root span /pods of the read-only API")
		}
		if len(problems) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans received after 30s:\n%s", strings.Join(problems, "\n"))
		}
		time.Sleep(time.Second)
	}
}

// traceProblems lists what the received spans lack.
func traceProblems(spans []receivedSpan, pod, ns, uid, host string) []string {
	var sync *receivedSpan
	for i := range spans {
		s := &spans[i]
		a := attrMap(s.span.GetAttributes())
		if s.span.GetName() == "syncPod" && a["k8s.pod.uid"] == uid && a["k8s.pod.update_type"] == "create" {
			sync = s
		}
	}
	if sync == nil {
		var names []string
		for _, s := range spans {
			names = append(names, s.span.GetName())
		}
		return []string{"no syncPod span of the pod with update type create; spans: " + strings.Join(names, ", ")}
	}
	var out []string
	a := attrMap(sync.span.GetAttributes())
	if a["k8s.pod.name"] != pod || a["k8s.namespace.name"] != ns || a["k8s.pod"] != ns+"/"+pod {
		out = append(out, "syncPod attributes "+sprintMap(a))
	}
	if sync.resource["service.name"] != "kubelet" || sync.resource["host.name"] != host {
		out = append(out, "resource "+sprintMap(sync.resource))
	}
	for _, rpc := range []string{"runtime.v1.RuntimeService/RunPodSandbox", "runtime.v1.RuntimeService/StartContainer"} {
		found := false
		for _, s := range spans {
			if s.span.GetName() == rpc && string(s.span.GetTraceId()) == string(sync.span.GetTraceId()) {
				found = true
			}
		}
		if !found {
			out = append(out, "no "+rpc+" span in the syncPod's trace")
		}
	}
	return out
}

func sprintMap(m map[string]string) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	return "{" + strings.Join(parts, " ") + "}"
}
