package kubeletserver

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	"k8s.io/apimachinery/pkg/util/proxy"
	translator "k8s.io/apiserver/pkg/util/proxy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
)

// Exec, attach and port-forward are served by the runtime's streaming server:
// the kubelet asks the runtime for a one-time URL and proxies the client's
// upgraded connection to it (never a redirect), as upstream does. SPDY
// requests are proxied as they are. WebSocket requests of the v5 remote command
// protocol are translated to SPDY towards the runtime, and WebSocket
// port-forward tunnels carry SPDY inside the WebSocket.

// execCommandParam is the query parameter carrying exec's command, one value
// per argument (upstream api.ExecCommandParam).
const execCommandParam = "command"

// exec serves GET|POST /exec/{namespace}/{pod}[/{uid}]/{container}?command=...
func (a *api) exec(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ref, _, ok := a.lookupPod(w, r, true)
	if !ok {
		return
	}
	u, err := a.host.GetExec(r.Context(), ref.namespace, ref.pod, ref.uid, ref.container, r.URL.Query()[execCommandParam], *opts)
	if err != nil {
		a.writeError(w, r, err, http.StatusInternalServerError)
		return
	}
	a.proxyRemoteCommand(w, r, u, opts)
}

// attach serves GET|POST /attach/{namespace}/{pod}[/{uid}]/{container}.
func (a *api) attach(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ref, _, ok := a.lookupPod(w, r, true)
	if !ok {
		return
	}
	u, err := a.host.GetAttach(r.Context(), ref.namespace, ref.pod, ref.uid, ref.container, *opts)
	if err != nil {
		a.writeError(w, r, err, http.StatusInternalServerError)
		return
	}
	a.proxyRemoteCommand(w, r, u, opts)
}

// proxyRemoteCommand proxies an exec or attach stream to the runtime's URL.
func (a *api) proxyRemoteCommand(w http.ResponseWriter, r *http.Request, u *url.URL, opts *remotecommand.Options) {
	if wsstream.IsWebSocketRequestWithStreamCloseProtocol(r) {
		translator.NewStreamTranslatorHandler(u, nil, 0, translator.Options{
			Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, Tty: opts.TTY,
		}).ServeHTTP(w, r)
		return
	}
	a.upgradeProxy(u).ServeHTTP(w, r)
}

// upgradeProxy proxies an upgrade request to u; a request that does not ask for
// an upgrade is refused (400).
func (a *api) upgradeProxy(u *url.URL) *proxy.UpgradeAwareHandler {
	return proxy.NewUpgradeAwareHandler(u, nil /* default transport */, false, true /* upgrade required */, &responder{logger: a.logger})
}

// portForward serves GET|POST /portForward/{namespace}/{pod}[/{uid}].
func (a *api) portForward(w http.ResponseWriter, r *http.Request) {
	tunnel := wsstream.IsWebSocketRequestWithTunnelingProtocol(r)
	opts := &portforward.V4Options{}
	if !tunnel {
		var err error
		if opts, err = portforward.NewV4Options(r); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	ref, _, ok := a.lookupPod(w, r, false)
	if !ok {
		return
	}
	// The host checks ref.uid (a mirror pod's UID stands for its static pod).
	u, err := a.host.GetPortForward(r.Context(), ref.namespace, ref.pod, ref.uid, *opts)
	if err != nil {
		a.writeError(w, r, err, http.StatusInternalServerError)
		return
	}
	var h http.Handler = a.upgradeProxy(u)
	if tunnel {
		h = translator.NewTunnelingHandler(h)
	}
	h.ServeHTTP(w, r)
}

// run serves POST /run/{namespace}/{pod}[/{uid}]/{container}?cmd=... (the
// command split at spaces, as upstream) with the command's output.
func (a *api) run(w http.ResponseWriter, r *http.Request) {
	ref, _, ok := a.lookupPod(w, r, true)
	if !ok {
		return
	}
	cmd := strings.Split(r.URL.Query().Get("cmd"), " ")
	out, err := a.host.RunInContainer(r.Context(), ref.namespace, ref.pod, ref.uid, ref.container, cmd)
	if err != nil {
		a.writeError(w, r, err, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json") // upstream's content type for the raw output
	_, _ = w.Write(out)
}

// checkpoint serves POST /checkpoint/{namespace}/{pod}/{container}[?timeout=s]
// with {"items":["<archive>"]}. A runtime without checkpoint support answers
// 501.
func (a *api) checkpoint(w http.ResponseWriter, r *http.Request) {
	ref, _, ok := a.lookupPod(w, r, true)
	if !ok {
		return
	}
	req := &runtimeapi.CheckpointContainerRequest{}
	if t := r.URL.Query()["timeout"]; len(t) > 0 {
		timeout, err := strconv.ParseInt(t[len(t)-1], 10, 64)
		if err != nil {
			http.Error(w, fmt.Sprintf("cannot parse value of timeout parameter %q", t[len(t)-1]), http.StatusBadRequest)
			return
		}
		req.Timeout = timeout
	}
	if err := a.host.CheckpointContainer(r.Context(), ref.namespace, ref.pod, ref.uid, ref.container, req); err != nil {
		a.writeError(w, r, fmt.Errorf("checkpointing of %s/%s/%s failed: %w", ref.namespace, ref.pod, ref.container, err),
			http.StatusInternalServerError)
		return
	}
	writeJSON(w, map[string][]string{"items": {req.Location}})
}

// responder reports proxy errors.
type responder struct{ logger *zap.Logger }

func (p *responder) Error(w http.ResponseWriter, r *http.Request, err error) {
	code := statusFor(err, http.StatusInternalServerError) // "Upgrade request required" is a BadRequest
	if code >= http.StatusInternalServerError {
		p.logger.Error("Error while proxying a stream to the runtime", zap.String("path", r.URL.Path), zap.Error(err))
	}
	http.Error(w, err.Error(), code)
}
