package stats

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"go.uber.org/zap"
)

// Handler serves GET and POST /stats/summary (also when mounted with the /stats
// prefix stripped), with ?only_cpu_and_memory=true for the CPU and memory summary,
// answering like upstream's go-restful handler: indented JSON, and
// "Internal Error: ..." with status 500 when the summary cannot be built.
func (p *Provider) Handler() http.Handler {
	return http.HandlerFunc(p.serveSummary)
}

func (p *Provider) serveSummary(w http.ResponseWriter, r *http.Request) {
	switch strings.TrimSuffix(r.URL.Path, "/") {
	case "/stats/summary", "/summary":
	default:
		writeText(w, http.StatusNotFound, "404: Page Not Found")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		writeText(w, http.StatusMethodNotAllowed, "405: Method Not Allowed")
		return
	}
	if err := r.ParseForm(); err != nil {
		p.internalError(w, r, fmt.Errorf("parse form failed: %w", err))
		return
	}
	v, found := r.Form["only_cpu_and_memory"]
	onlyCPUAndMemory := found && len(v) == 1 && v[0] == "true"
	summary, err := p.Summary(r.Context(), onlyCPUAndMemory)
	if err != nil {
		p.internalError(w, r, err)
		return
	}
	body, err := json.MarshalIndent(summary, "", " ")
	if err != nil {
		p.internalError(w, r, fmt.Errorf("encode summary: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(body); err != nil {
		p.logger.Debug("write summary", zap.Error(err))
	}
}

func (p *Provider) internalError(w http.ResponseWriter, r *http.Request, err error) {
	p.logger.Error("serve stats summary", zap.String("url", r.URL.String()), zap.Error(err))
	writeText(w, http.StatusInternalServerError, "Internal Error: "+err.Error())
}

func writeText(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg))
}
