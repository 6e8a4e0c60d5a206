package stats

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestHandler(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc, method, target string
		body                 string
		fail                 bool
		wantCode             int
		wantFs               bool // the full summary (node.fs set)
		wantText             string
	}{
		{desc: "GET the full summary", method: http.MethodGet, target: "/stats/summary", wantCode: 200, wantFs: true},
		{desc: "POST works too", method: http.MethodPost, target: "/stats/summary", wantCode: 200, wantFs: true},
		{desc: "mounted without the /stats prefix", method: http.MethodGet, target: "/summary/", wantCode: 200, wantFs: true},
		{desc: "only CPU and memory", method: http.MethodGet, target: "/stats/summary?only_cpu_and_memory=true", wantCode: 200},
		{desc: "only_cpu_and_memory in a POST form", method: http.MethodPost, target: "/stats/summary",
			body: "only_cpu_and_memory=true", wantCode: 200},
		{desc: "only_cpu_and_memory=false is the full summary", method: http.MethodGet,
			target: "/stats/summary?only_cpu_and_memory=false", wantCode: 200, wantFs: true},
		{desc: "only_cpu_and_memory twice is the full summary", method: http.MethodGet,
			target: "/stats/summary?only_cpu_and_memory=true&only_cpu_and_memory=true", wantCode: 200, wantFs: true},
		{desc: "other methods are refused", method: http.MethodPut, target: "/stats/summary", wantCode: 405, wantText: "405: Method Not Allowed"},
		{desc: "other paths are not found", method: http.MethodGet, target: "/stats/container", wantCode: 404, wantText: "404: Page Not Found"},
		{desc: "a runtime failure is an internal error", method: http.MethodGet, target: "/stats/summary", fail: true,
			wantCode: 500, wantText: "Internal Error: list pod sandboxes: boom"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t)
			if tc.fail {
				e.rt.InjectError("ListPodSandbox", errors.New("boom"))
			}
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req := httptest.NewRequest(tc.method, tc.target, body)
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			rec := httptest.NewRecorder()
			e.p.Handler().ServeHTTP(rec, req)
			if rec.Code != tc.wantCode {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.wantCode, rec.Body)
			}
			if tc.wantCode != 200 {
				if got := rec.Body.String(); got != tc.wantText {
					t.Errorf("body %q, want %q", got, tc.wantText)
				}
				return
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
			var s statsapi.Summary
			if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
				t.Fatalf("decode: %v\n%s", err, rec.Body)
			}
			if s.Node.NodeName != "node-a" || len(s.Pods) != 2 || (s.Node.Fs != nil) != tc.wantFs {
				t.Errorf("summary node %q fs %v pods %d, want full=%v", s.Node.NodeName, s.Node.Fs, len(s.Pods), tc.wantFs)
			}
			if !strings.Contains(rec.Body.String(), "\n \"node\": {") {
				t.Errorf("body is not indented like upstream's:\n%.200s", rec.Body)
			}
		})
	}
}
