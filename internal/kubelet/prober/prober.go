package prober

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// Event reasons (upstream names).
const (
	ReasonUnhealthy    = "Unhealthy"
	ReasonProbeWarning = "ProbeWarning"
)

// userAgent is sent by httpGet and grpc probes, as upstream ("kube-probe/<major>.<minor>").
const userAgent = "kube-probe/1.37"

// maxProbeRetries is how often a probe that errored (could not run) is retried at once.
const maxProbeRetries = 3

// execGrace (in timeout units) is how long past timeoutSeconds an exec may take before
// the prober gives up on the runtime.
const execGrace = 2

// Errors a probe can end with (matched with errors.Is).
var (
	ErrNoHandler = errors.New("probe has no handler")
	ErrNoRunner  = errors.New("no runner for exec probes")
	ErrBadPort   = errors.New("invalid probe port")
)

// outcome is one probe attempt's verdict; warning counts as success plus an event.
type outcome int

const (
	outcomeUnknown outcome = iota
	outcomeSuccess
	outcomeWarning
	outcomeFailure
)

// prober runs the four probe kinds.
type prober struct {
	runner   Runner
	recorder record.EventRecorder
	logger   *zap.Logger
	http     *http.Transport
	// timeoutUnit is the unit of timeoutSeconds (time.Second; tests shorten it).
	timeoutUnit time.Duration
}

func newProber(r Runner, rec record.EventRecorder, logger *zap.Logger) *prober {
	return &prober{runner: r, recorder: rec, logger: logger, http: newHTTPTransport(), timeoutUnit: time.Second}
}

// probe runs the container's probe of type t once (with retries when it errors),
// records an event on failure and maps the verdict to a Result. An error means the
// probe could not run; the worker then ignores the attempt.
func (p *prober) probe(ctx context.Context, t ProbeType, pod *v1.Pod, status *v1.PodStatus, c *v1.Container, id kubecontainer.ContainerID) (Result, error) {
	spec := probeSpec(t, c)
	if spec == nil {
		return Success, nil
	}
	out, output, err := p.runWithRetries(ctx, spec, status, c, id)
	if ctx.Err() != nil {
		return Unknown, fmt.Errorf("%s probe stopped: %w", t, ctx.Err())
	}
	log := p.logger.With(zap.String("pod", podName(pod)), zap.String("container", c.Name), zap.Stringer("probe", t))
	switch {
	case err != nil:
		log.Debug("probe errored", zap.Error(err))
		p.event(pod, v1.EventTypeWarning, ReasonUnhealthy, fmt.Sprintf("%s probe errored: %v", t, err))
		return Failure, err
	case out == outcomeWarning:
		log.Debug("probe succeeded with a warning", zap.String("output", output))
		p.event(pod, v1.EventTypeWarning, ReasonProbeWarning, fmt.Sprintf("%s probe warning: %s", t, output))
		return Success, nil
	case out != outcomeSuccess:
		log.Debug("probe failed", zap.String("output", output))
		p.event(pod, v1.EventTypeWarning, ReasonUnhealthy, fmt.Sprintf("%s probe failed: %s", t, output))
		return Failure, nil
	}
	log.Debug("probe succeeded")
	return Success, nil
}

func (p *prober) event(pod *v1.Pod, eventType, reason, msg string) {
	if p.recorder != nil {
		p.recorder.Event(pod, eventType, reason, msg)
	}
}

func (p *prober) runWithRetries(ctx context.Context, spec *v1.Probe, status *v1.PodStatus, c *v1.Container, id kubecontainer.ContainerID) (outcome, string, error) {
	var (
		out    outcome
		output string
		err    error
	)
	for i := 0; i < maxProbeRetries && ctx.Err() == nil; i++ {
		out, output, err = p.runProbe(ctx, spec, status, c, id)
		if err == nil {
			return out, output, nil
		}
	}
	if err == nil {
		err = ctx.Err()
	}
	return out, output, err
}

// runProbe runs one attempt of whichever handler the probe has.
func (p *prober) runProbe(ctx context.Context, spec *v1.Probe, status *v1.PodStatus, c *v1.Container, id kubecontainer.ContainerID) (outcome, string, error) {
	timeout := time.Duration(spec.TimeoutSeconds) * p.timeoutUnit
	if timeout <= 0 {
		timeout = defaultTimeoutSeconds * p.timeoutUnit
	}
	switch {
	case spec.Exec != nil:
		return p.execProbe(ctx, id, expandCommand(spec.Exec.Command, c.Env), timeout)
	case spec.HTTPGet != nil:
		port, err := resolvePort(spec.HTTPGet.Port, c)
		if err != nil {
			return outcomeUnknown, "", err
		}
		req, err := newHTTPRequest(ctx, spec.HTTPGet, status.PodIP, port)
		if err != nil {
			return outcomeUnknown, "", err
		}
		return p.httpProbe(req, timeout)
	case spec.TCPSocket != nil:
		port, err := resolvePort(spec.TCPSocket.Port, c)
		if err != nil {
			return outcomeUnknown, "", err
		}
		return tcpProbe(ctx, hostOr(spec.TCPSocket.Host, status.PodIP), port, timeout)
	case spec.GRPC != nil:
		if err := checkPort(int(spec.GRPC.Port)); err != nil {
			return outcomeUnknown, "", err
		}
		service := ""
		if spec.GRPC.Service != nil {
			service = *spec.GRPC.Service
		}
		return grpcProbe(ctx, status.PodIP, int(spec.GRPC.Port), service, timeout)
	}
	return outcomeUnknown, "", fmt.Errorf("container %q: %w", c.Name, ErrNoHandler)
}

func hostOr(host, podIP string) string {
	if host != "" {
		return host
	}
	return podIP
}

// execProbe runs the command through the Runner: exit 0 is success, any other exit
// status or a timeout is failure, other errors mean the probe could not run.
func (p *prober) execProbe(ctx context.Context, id kubecontainer.ContainerID, cmd []string, timeout time.Duration) (outcome, string, error) {
	if p.runner == nil {
		return outcomeUnknown, "", ErrNoRunner
	}
	// The runtime enforces the timeout on the command; the grace bounds a runtime that
	// does not answer.
	cctx, cancel := context.WithTimeout(ctx, timeout+execGrace*p.timeoutUnit)
	defer cancel()
	data, err := p.runner.RunInContainer(cctx, id, cmd, timeout)
	if err == nil {
		return outcomeSuccess, string(data), nil
	}
	var exit interface{ ExitStatus() int }
	if errors.As(err, &exit) {
		if exit.ExitStatus() == 0 {
			return outcomeSuccess, string(data), nil
		}
		return outcomeFailure, string(data), nil
	}
	if ctx.Err() != nil {
		return outcomeUnknown, "", fmt.Errorf("exec probe: %w", ctx.Err())
	}
	if cctx.Err() != nil || isTimeout(err) {
		return outcomeFailure, fmt.Sprintf("command %q timed out after %v", strings.Join(cmd, " "), timeout), nil
	}
	return outcomeUnknown, "", fmt.Errorf("exec probe in %s: %w", id, err)
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
		return true
	}
	var t interface{ Timeout() bool }
	if errors.As(err, &t) && t.Timeout() {
		return true
	}
	return strings.Contains(err.Error(), "timed out")
}

// resolvePort turns a port number or a container port name into a number.
func resolvePort(port intstr.IntOrString, c *v1.Container) (int, error) {
	n := -1
	switch port.Type {
	case intstr.Int:
		n = port.IntValue()
	case intstr.String:
		for _, p := range c.Ports {
			if p.Name == port.StrVal {
				n = int(p.ContainerPort)
				break
			}
		}
		if n < 0 {
			return 0, fmt.Errorf("%w: no port named %q in container %q", ErrBadPort, port.StrVal, c.Name)
		}
	}
	return n, checkPort(n)
}

func checkPort(n int) error {
	if n <= 0 || n > 65535 {
		return fmt.Errorf("%w: %d", ErrBadPort, n)
	}
	return nil
}

// expandCommand expands $(VAR) references to the container's literal env values, as
// upstream does for exec probes ($$ escapes a $; unknown references stay as they are).
func expandCommand(cmd []string, env []v1.EnvVar) []string {
	vars := make(map[string]string)
	for _, e := range env {
		if e.ValueFrom == nil {
			vars[e.Name] = e.Value
		}
	}
	out := make([]string, len(cmd))
	for i, s := range cmd {
		out[i] = kubecontainer.Expand(s, func(name string) (string, bool) {
			v, ok := vars[name]
			return v, ok
		})
	}
	return out
}
