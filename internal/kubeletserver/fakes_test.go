package kubeletserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/testca"
)

// hostCall is one recorded HostInterface call.
type hostCall struct {
	method                    string
	namespace, pod, container string
	uid                       k8stypes.UID
	cmd                       []string
	logOpts                   *v1.PodLogOptions
	stream                    remotecommand.Options
	ports                     []int32
	timeout                   int64
}

// fakeHost is a HostInterface over fixed pods. The streaming methods answer
// with stream(kind, call) when set.
type fakeHost struct {
	pods    []*v1.Pod
	running []*v1.Pod
	logs    string // written to stdout by GetContainerLogs
	errLogs string // written to stderr by GetContainerLogs
	err     error  // returned by every method that can fail
	stream  func(call hostCall) (*url.URL, error)

	mu    sync.Mutex
	calls []hostCall
}

func (h *fakeHost) record(c hostCall) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, c)
}

func (h *fakeHost) recorded() []hostCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hostCall(nil), h.calls...)
}

func (h *fakeHost) Pods() []v1.Pod {
	out := make([]v1.Pod, 0, len(h.pods))
	for _, p := range h.pods {
		out = append(out, *p)
	}
	return out
}

func (h *fakeHost) GetPodByName(namespace, name string) (*v1.Pod, bool) {
	for _, p := range h.pods {
		if p.Namespace == namespace && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

func (h *fakeHost) GetRunningPods(context.Context) ([]*v1.Pod, error) {
	return h.running, h.err
}

func (h *fakeHost) GetContainerLogs(_ context.Context, ns, pod, container string, opts *v1.PodLogOptions, stdout, stderr io.Writer) error {
	h.record(hostCall{method: "logs", namespace: ns, pod: pod, container: container, logOpts: opts})
	if h.err != nil {
		return h.err
	}
	if stdout != nil {
		_, _ = io.WriteString(stdout, h.logs)
	}
	if stderr != nil {
		_, _ = io.WriteString(stderr, h.errLogs)
	}
	return nil
}

func (h *fakeHost) streamCall(c hostCall) (*url.URL, error) {
	h.record(c)
	if h.err != nil {
		return nil, h.err
	}
	if h.stream == nil {
		return &url.URL{Scheme: "http", Host: "127.0.0.1:1", Path: "/" + c.method}, nil
	}
	return h.stream(c)
}

func (h *fakeHost) GetExec(_ context.Context, ns, pod string, uid k8stypes.UID, container string, cmd []string, opts remotecommand.Options) (*url.URL, error) {
	return h.streamCall(hostCall{method: "exec", namespace: ns, pod: pod, uid: uid, container: container, cmd: cmd, stream: opts})
}

func (h *fakeHost) GetAttach(_ context.Context, ns, pod string, uid k8stypes.UID, container string, opts remotecommand.Options) (*url.URL, error) {
	return h.streamCall(hostCall{method: "attach", namespace: ns, pod: pod, uid: uid, container: container, stream: opts})
}

func (h *fakeHost) GetPortForward(_ context.Context, ns, pod string, uid k8stypes.UID, opts portforward.V4Options) (*url.URL, error) {
	return h.streamCall(hostCall{method: "portforward", namespace: ns, pod: pod, uid: uid, ports: opts.Ports})
}

func (h *fakeHost) RunInContainer(_ context.Context, ns, pod string, uid k8stypes.UID, container string, cmd []string) ([]byte, error) {
	h.record(hostCall{method: "run", namespace: ns, pod: pod, uid: uid, container: container, cmd: cmd})
	if h.err != nil {
		return nil, h.err
	}
	return []byte("ran"), nil
}

func (h *fakeHost) CheckpointContainer(_ context.Context, ns, pod string, uid k8stypes.UID, container string, opts *runtimeapi.CheckpointContainerRequest) error {
	h.record(hostCall{method: "checkpoint", namespace: ns, pod: pod, uid: uid, container: container, timeout: opts.Timeout})
	if h.err != nil {
		return h.err
	}
	opts.Location = "/var/lib/kubelet/checkpoints/x.tar"
	return nil
}

// testPod is default/web (uid-web) with containers app, init and debug
// (ephemeral).
func testPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: v1.PodSpec{
			Containers:          []v1.Container{{Name: "app", Image: "busybox"}},
			InitContainers:      []v1.Container{{Name: "init", Image: "busybox"}},
			EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug"}}},
		},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
}

func notFound(what string) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, what)
}

// selfSignedTLS returns a serving config for 127.0.0.1 with a fresh
// certificate of a fresh CA (clients skip verification).
func selfSignedTLS(t *testing.T) *tls.Config {
	t.Helper()
	certPEM, keyPEM := testca.New(t, "kubelet-test-ca").Issue(t, testca.Cert{CommonName: "kubelet-test",
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
}
