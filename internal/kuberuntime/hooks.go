package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// hookUserAgent is the User-Agent of httpGet lifecycle hooks (upstream's form).
const hookUserAgent = "kube-lifecycle/1.37"

// errNoPodIP is returned by an httpGet hook without host when the pod has no IP.
var errNoPodIP = errors.New("the pod has no IP")

// RunInContainer runs cmd in the container through the runtime's ExecSync and
// returns stdout followed by stderr. A non-zero exit code is an error (the CRI
// client reports it as one); timeout 0 means no timeout beyond ctx.
func (m *Manager) RunInContainer(ctx context.Context, id kubecontainer.ContainerID, cmd []string, timeout time.Duration) ([]byte, error) {
	stdout, stderr, err := m.runtime.ExecSync(ctx, id.ID, cmd, timeout)
	out := make([]byte, 0, len(stdout)+len(stderr))
	out = append(append(out, stdout...), stderr...)
	if err != nil {
		return out, fmt.Errorf("exec %q in container %s: %w", cmd, id, err)
	}
	return out, nil
}

// runLifecycleHandler runs a postStart or preStop handler of a container. It
// returns a message for the user on failure. podIP may be empty: an httpGet
// hook without host then asks the runtime for the pod's IP.
func (m *Manager) runLifecycleHandler(ctx context.Context, pod *v1.Pod, container *v1.Container, id kubecontainer.ContainerID, h *v1.LifecycleHandler, podIP string) (string, error) {
	switch {
	case h.Exec != nil:
		out, err := m.RunInContainer(ctx, id, h.Exec.Command, 0)
		if err != nil {
			return fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q",
				h.Exec.Command, container.Name, formatPod(pod), err, string(out)), err
		}
		return "", nil
	case h.HTTPGet != nil:
		if err := m.runHTTPHook(ctx, pod, container, h.HTTPGet, podIP); err != nil {
			return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v",
				h.HTTPGet.Path, container.Name, formatPod(pod), err), err
		}
		return "", nil
	case h.Sleep != nil:
		if err := sleepHook(ctx, h.Sleep.Seconds); err != nil {
			return fmt.Sprintf("Sleep lifecycle hook (%d) for Container %q in Pod %q failed - error: %v",
				h.Sleep.Seconds, container.Name, formatPod(pod), err), err
		}
		return "", nil
	case h.TCPSocket != nil:
		err := errors.New("tcpSocket lifecycle handlers are not supported")
		return err.Error(), err
	}
	err := errors.New("invalid lifecycle handler: no action set")
	return err.Error(), err
}

// runHTTPHook sends the GET of an httpGet hook; a 2xx or 3xx answer is success.
func (m *Manager) runHTTPHook(ctx context.Context, pod *v1.Pod, container *v1.Container, action *v1.HTTPGetAction, podIP string) error {
	host := action.Host
	if host == "" {
		host = podIP
	}
	if host == "" {
		status, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			return fmt.Errorf("look up the pod IP: %w", err)
		}
		if len(status.IPs) == 0 {
			return errNoPodIP
		}
		host = status.IPs[0]
	}
	u, err := hookURL(action, host, container)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("build request for %s: %w", u, err)
	}
	req.Header.Set("User-Agent", hookUserAgent)
	req.Header.Set("Accept", "*/*")
	for _, h := range action.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Set(h.Name, h.Value)
	}
	resp, err := m.hookClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64*1024))
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusBadRequest {
		return fmt.Errorf("GET %s: HTTP status %d", u, resp.StatusCode)
	}
	return nil
}

// hookURL builds the URL of an httpGet action against host.
func hookURL(action *v1.HTTPGetAction, host string, container *v1.Container) (string, error) {
	port, err := resolvePort(action.Port, container)
	if err != nil {
		return "", err
	}
	scheme := strings.ToLower(string(action.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := action.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	ref, err := url.Parse(path)
	if err != nil {
		return "", fmt.Errorf("bad hook path %q: %w", action.Path, err)
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: ref.Path, RawQuery: ref.RawQuery}
	return u.String(), nil
}

// resolvePort turns a port number or a named container port into a number.
func resolvePort(p intstr.IntOrString, container *v1.Container) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	for _, cp := range container.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("no port named %q in container %q", p.StrVal, container.Name)
}

// sleepHook waits for the given seconds, or until ctx ends (an error).
func sleepHook(ctx context.Context, seconds int64) error {
	t := time.NewTimer(time.Duration(seconds) * time.Second)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("sleep interrupted before %ds: %w", seconds, ctx.Err())
	case <-t.C:
		return nil
	}
}
