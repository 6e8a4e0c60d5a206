package podsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podsource/manifest"
)

const (
	// httpTimeout bounds one GET of the manifest URL (upstream uses 10s).
	httpTimeout = 10 * time.Second
	// loudFailures is how many consecutive fetch failures are logged at warning level
	// before they drop to debug, as upstream does.
	loudFailures = 3
)

// httpSource polls ManifestURL for a v1 Pod or PodList. Fetch and decode errors are
// logged and the last good state is kept.
type httpSource struct {
	url      string
	header   http.Header
	nodeName string
	decode   manifest.Options
	period   time.Duration
	client   *http.Client
	logger   *zap.Logger
	out      *emitter

	lastBody []byte
	failures int
}

func newHTTPSource(s *Source) *httpSource {
	return &httpSource{
		url:      s.opts.ManifestURL,
		header:   s.opts.ManifestURLHeaders,
		nodeName: s.opts.NodeName,
		decode:   s.opts.manifestOptions(),
		period:   s.opts.HTTPCheckFrequency,
		client:   &http.Client{Timeout: httpTimeout},
		logger:   s.logger.With(zap.String("source", kubecontainer.HTTPSource), zap.String("url", s.opts.ManifestURL)),
		out:      newEmitter(s, kubecontainer.HTTPSource),
	}
}

func (h *httpSource) run(ctx context.Context) {
	h.logger.Info("Polling the manifest URL", zap.Duration("period", h.period))
	ticker := time.NewTicker(h.period)
	defer ticker.Stop()
	for {
		h.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// poll fetches once and logs failures, loudly only for the first few in a row.
func (h *httpSource) poll(ctx context.Context) {
	err := h.fetch(ctx)
	switch {
	case err == nil:
		if h.failures > 0 {
			h.logger.Info("Read pods from the manifest URL again", zap.Int("failures", h.failures))
		}
		h.failures = 0
	case ctx.Err() != nil:
		return
	case h.failures < loudFailures:
		h.failures++
		h.logger.Warn("Failed to read pods from the manifest URL; keeping the last state", zap.Error(err))
	default:
		h.failures++
		h.logger.Debug("Failed to read pods from the manifest URL; keeping the last state", zap.Error(err))
	}
}

// fetch GETs the URL and sends its pods. An empty body is an empty state (as upstream);
// an unchanged body is skipped; a body that does not decode is reported once and the
// last state kept.
func (h *httpSource) fetch(ctx context.Context) error {
	body, err := h.get(ctx)
	if err != nil {
		return err
	}
	if len(body) == 0 {
		h.lastBody = body
		h.out.emit(ctx, nil, map[string]string{})
		return fmt.Errorf("GET %s: empty body", h.url)
	}
	if h.out.sent && bytes.Equal(body, h.lastBody) {
		return nil
	}
	h.lastBody = body
	pods, err := manifest.Decode(body, h.url, h.nodeName, h.decode)
	if err != nil {
		h.out.report(map[string]string{h.url: err.Error()})
		return nil // reported; fetching itself worked
	}
	entries := make([]entry, len(pods))
	for i, pod := range pods {
		entries[i] = entry{pod: pod, origin: h.url}
	}
	h.out.emit(ctx, entries, map[string]string{})
	return nil
}

func (h *httpSource) get(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.url, nil)
	if err != nil {
		return nil, fmt.Errorf("build request for %s: %w", h.url, err)
	}
	if h.header != nil {
		req.Header = h.header.Clone()
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET manifest URL: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", h.url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, manifest.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: read body: %w", h.url, err)
	}
	if len(body) > manifest.MaxBytes {
		return nil, errors.New("GET " + h.url + ": body larger than the manifest limit")
	}
	return body, nil
}
