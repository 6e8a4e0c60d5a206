package podsource

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/eventtest"
)

// updateWait bounds how long a test waits for an expected update.
const updateWait = 2 * time.Second

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc    string
		opts    Options
		wantErr string
		seen    bool // SeenAllSources right after New
	}{
		{desc: "no sources", opts: Options{NodeName: "n"}, seen: true},
		{desc: "node name required", opts: Options{ManifestPath: "/x"}, wantErr: "NodeName"},
		{desc: "relative URL", opts: Options{NodeName: "n", ManifestURL: "/pods"}, wantErr: "/pods"},
		{desc: "ftp URL", opts: Options{NodeName: "n", ManifestURL: "ftp://127.0.0.1/pods"}, wantErr: "ftp://"},
		{desc: "file source not seen yet", opts: Options{NodeName: "n", ManifestPath: "/x"}},
		{desc: "http source not seen yet", opts: Options{NodeName: "n", ManifestURL: "http://127.0.0.1:1/"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			s, err := New(tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if s.opts.FileCheckFrequency != DefaultFileCheckFrequency || s.opts.HTTPCheckFrequency != DefaultHTTPCheckFrequency {
				t.Errorf("frequencies not defaulted: %v %v", s.opts.FileCheckFrequency, s.opts.HTTPCheckFrequency)
			}
			if got := s.SeenAllSources(); got != tc.seen {
				t.Errorf("SeenAllSources = %v, want %v", got, tc.seen)
			}
		})
	}
}

// eventLog collects the Recorder's events.
type eventLog struct{ eventtest.Recorder }

// waitFor polls until some event contains all substrings, or fails after updateWait.
func (l *eventLog) waitFor(t *testing.T, substrings ...string) {
	t.Helper()
	deadline := time.Now().Add(updateWait)
	for time.Now().Before(deadline) {
		found := slices.ContainsFunc(l.Strings(), func(e string) bool {
			for _, s := range substrings {
				if !strings.Contains(e, s) {
					return false
				}
			}
			return true
		})
		if found {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no event containing %q", substrings)
}

// startSource runs a Source until the test ends.
func startSource(t *testing.T, opts Options) (*Source, *eventLog) {
	t.Helper()
	events := &eventLog{}
	opts.Logger = zaptest.NewLogger(t)
	opts.Recorder = events
	s, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(updateWait):
			t.Error("Run did not return after cancel")
		}
	})
	return s, events
}

// nextUpdate returns the next update or fails after updateWait.
func nextUpdate(t *testing.T, s *Source) kubecontainer.PodUpdate {
	t.Helper()
	select {
	case u := <-s.Updates():
		if u.Op != kubecontainer.SET {
			t.Fatalf("update op %v, want SET", u.Op)
		}
		return u
	case <-time.After(updateWait):
		t.Fatal("no update within", updateWait)
	}
	return kubecontainer.PodUpdate{}
}

// noUpdate fails if an update arrives within d.
func noUpdate(t *testing.T, s *Source, d time.Duration) {
	t.Helper()
	select {
	case u := <-s.Updates():
		t.Fatalf("unexpected update from %s: %v", u.Source, podNames(u.Pods))
	case <-time.After(d):
	}
}

func sortedNames(pods []*v1.Pod) []string {
	names := podNames(pods)
	slices.Sort(names)
	return names
}

func podNames(pods []*v1.Pod) []string {
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	return names
}
