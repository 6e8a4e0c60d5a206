package podsource

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// manifestServer serves a body that the test changes, on 127.0.0.1.
type manifestServer struct {
	mu     sync.Mutex
	status int
	body   string
	header http.Header // of the last request
}

// podListJSON is a PodList of two pods, which only a URL source accepts.
const podListJSON = `{"apiVersion":"v1","kind":"PodList","items":[
 {"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"busybox"}]}},
 {"metadata":{"name":"b"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}]}`

func (m *manifestServer) set(status int, body string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.status, m.body = status, body
}

func (m *manifestServer) lastHeader() http.Header {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.header
}

func (m *manifestServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.header = r.Header.Clone()
	w.WriteHeader(m.status)
	_, _ = w.Write([]byte(m.body))
}

func TestHTTPSource(t *testing.T) {
	t.Parallel()
	srv := &manifestServer{status: http.StatusOK, body: podManifest("single", "busybox")}
	ts := httptest.NewServer(srv) // listens on 127.0.0.1
	t.Cleanup(ts.Close)

	s, events := startSource(t, Options{
		NodeName:           "n1",
		ManifestURL:        ts.URL + "/pods",
		ManifestURLHeaders: http.Header{"X-Token": []string{"secret"}},
		HTTPCheckFrequency: 50 * time.Millisecond,
	})

	u := nextUpdate(t, s)
	if u.Source != kubecontainer.HTTPSource || len(u.Pods) != 1 || u.Pods[0].Name != "single-n1" {
		t.Fatalf("first update %s %v", u.Source, podNames(u.Pods))
	}
	if got := u.Pods[0].Annotations[kubecontainer.ConfigSourceAnnotationKey]; got != kubecontainer.HTTPSource {
		t.Errorf("config.source = %q", got)
	}
	if !s.SeenAllSources() {
		t.Error("SeenAllSources false after the first state")
	}
	if got := srv.lastHeader().Get("X-Token"); got != "secret" {
		t.Errorf("header X-Token = %q", got)
	}
	noUpdate(t, s, 300*time.Millisecond) // unchanged body: nothing new

	srv.set(http.StatusOK, podListJSON)
	if got := sortedNames(nextUpdate(t, s).Pods); len(got) != 2 || got[0] != "a-n1" || got[1] != "b-n1" {
		t.Fatalf("pod list update %v", got)
	}

	// Errors keep the last good state.
	srv.set(http.StatusInternalServerError, "boom")
	noUpdate(t, s, 300*time.Millisecond)
	srv.set(http.StatusOK, "apiVersion: v1\nkind: Pod\nspec: {bogus: 1}\n")
	events.waitFor(t, "FailedToParseManifest", ts.URL, `unknown field "spec.bogus"`)
	noUpdate(t, s, 200*time.Millisecond)

	srv.set(http.StatusOK, podManifest("again", "busybox"))
	if u := nextUpdate(t, s); len(u.Pods) != 1 || u.Pods[0].Name != "again-n1" {
		t.Fatalf("recovered update %v", podNames(u.Pods))
	}

	srv.set(http.StatusOK, "") // an empty body is an empty state, as upstream
	if u := nextUpdate(t, s); len(u.Pods) != 0 {
		t.Fatalf("empty body update %v", podNames(u.Pods))
	}
}

func TestSeenAllSourcesBoth(t *testing.T) {
	t.Parallel()
	srv := &manifestServer{status: http.StatusServiceUnavailable}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)

	s, _ := startSource(t, Options{
		NodeName: "n1", ManifestPath: t.TempDir(), FileCheckFrequency: time.Hour,
		ManifestURL: ts.URL, HTTPCheckFrequency: 50 * time.Millisecond,
	})
	if u := nextUpdate(t, s); u.Source != kubecontainer.FileSource {
		t.Fatalf("first update from %s, want file", u.Source)
	}
	if s.SeenAllSources() {
		t.Fatal("SeenAllSources true while the URL has not answered")
	}
	srv.set(http.StatusOK, podManifest("p", "busybox"))
	if u := nextUpdate(t, s); u.Source != kubecontainer.HTTPSource {
		t.Fatalf("update from %s, want http", u.Source)
	}
	if !s.SeenAllSources() {
		t.Fatal("SeenAllSources false after both sources delivered")
	}
}
