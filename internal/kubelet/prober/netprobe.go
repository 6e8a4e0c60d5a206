package prober

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
)

// maxBodyLength caps how much of an httpGet response body is read (upstream: 10 KiB).
const maxBodyLength = 10 << 10

// maxRedirects is how many same-host redirects an httpGet probe follows.
const maxRedirects = 10

// newHTTPTransport builds the transport every httpGet probe shares: no proxy, no
// keep-alives (each probe is a fresh connection), no compression, and no certificate
// verification (as upstream: probes check liveness, not identity).
func newHTTPTransport() *http.Transport {
	return &http.Transport{
		Proxy:              nil,
		TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // upstream behaviour for probes
		DisableKeepAlives:  true,
		DisableCompression: true,
	}
}

// newHTTPRequest builds the GET request for an httpGet action: host is the action's host
// or the pod IP, headers are the action's plus User-Agent and Accept defaults, and a
// Host header sets the request's Host.
func newHTTPRequest(ctx context.Context, action *v1.HTTPGetAction, podIP string, port int) (*http.Request, error) {
	scheme := strings.ToLower(string(action.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	u, err := url.Parse(action.Path)
	if err != nil {
		u = &url.URL{Path: action.Path}
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(hostOr(action.Host, podIP), strconv.Itoa(port))

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("http probe request for %s: %w", u, err)
	}
	headers := make(http.Header)
	for _, h := range action.HTTPHeaders {
		headers.Add(h.Name, h.Value)
	}
	if _, ok := headers["User-Agent"]; !ok {
		headers.Set("User-Agent", userAgent)
	}
	if _, ok := headers["Accept"]; !ok {
		headers.Set("Accept", "*/*")
	} else if headers.Get("Accept") == "" {
		headers.Del("Accept")
	}
	req.Header = headers
	req.Host = headers.Get("Host")
	return req, nil
}

// sameHostRedirects follows redirects only while they stay on the first request's host.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	return nil
}

// httpProbe sends the request: 200-399 is success, and a redirect to another host that
// was not followed is success with a warning. Transport errors are failures.
func (p *prober) httpProbe(req *http.Request, timeout time.Duration) (outcome, string, error) {
	client := &http.Client{Timeout: timeout, Transport: p.http, CheckRedirect: sameHostRedirects}
	res, err := client.Do(req)
	if err != nil {
		return outcomeFailure, err.Error(), nil
	}
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxBodyLength))
	if err != nil {
		return outcomeFailure, fmt.Sprintf("reading the response body: %v", err), nil
	}
	body := string(b)
	if res.StatusCode >= http.StatusOK && res.StatusCode < http.StatusBadRequest {
		if res.StatusCode >= http.StatusMultipleChoices {
			return outcomeWarning, "Probe terminated redirects, Response body: " + body, nil
		}
		return outcomeSuccess, body, nil
	}
	return outcomeFailure, fmt.Sprintf("HTTP probe failed with statuscode: %d", res.StatusCode), nil
}

// tcpProbe succeeds when a TCP connection opens within the timeout.
func tcpProbe(ctx context.Context, host string, port int, timeout time.Duration) (outcome, string, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return outcomeFailure, err.Error(), nil
	}
	if err := conn.Close(); err != nil {
		return outcomeFailure, err.Error(), nil
	}
	return outcomeSuccess, "", nil
}

// grpcProbe calls grpc.health.v1.Health/Check for the service; SERVING is success.
func grpcProbe(ctx context.Context, host string, port int, service string, timeout time.Duration) (outcome, string, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(userAgent))
	if err != nil {
		return outcomeFailure, fmt.Sprintf("error: failed to connect service at %q: %v", addr, err), nil
	}
	defer func() { _ = conn.Close() }()

	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return outcomeFailure, grpcFailure(addr, timeout, err), nil
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return outcomeFailure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus()), nil
	}
	return outcomeSuccess, "service healthy", nil
}

func grpcFailure(addr string, timeout time.Duration, err error) string {
	st, _ := status.FromError(err)
	switch {
	case st.Code() == codes.Unimplemented:
		return "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): " + st.Message()
	case st.Code() == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("timeout: health rpc did not complete within %v", timeout)
	case st.Code() == codes.Unavailable:
		return fmt.Sprintf("error: failed to connect service at %q: %v", addr, st.Message())
	}
	return fmt.Sprintf("error: health rpc probe failed: %v", err)
}
