package podsource

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podsource/manifest"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// TestIntegrationUpstreamStaticPodUIDs pins static pod UIDs to upstream's:
// for every manifest of testdata/upstream-uid (kubeadm's control plane pods
// among them) and for one served at a URL, the UID this kubelet gives must be
// the one upstream's kubelet v1.37.1 gives, computed by upstream's own pod
// sources (scripts/controlplane/staticpoduid). Equal UIDs are what lets one
// kubelet take over the other's static pods without restarting them.
func TestIntegrationUpstreamStaticPodUIDs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	tool, err := controlplane.UpstreamBinary(ctx, "staticpoduid")
	if err != nil {
		t.Fatal(err)
	}
	const node = "node-a"
	files, err := filepath.Glob(filepath.Join(mustAbs(t, "testdata/upstream-uid"), "*"))
	if err != nil || len(files) < 5 {
		t.Fatalf("testdata: %v %v", files, err)
	}
	served, err := os.ReadFile(files[1])
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(served) }))
	defer srv.Close()
	url := srv.URL + "/manifests/apiserver.yaml"
	out, err := exec.CommandContext(ctx, tool, append([]string{node, url}, files...)...).Output()
	if err != nil {
		t.Fatalf("staticpoduid: %v", err)
	}
	var want map[string]string
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatalf("staticpoduid printed %q: %v", out, err)
	}
	if len(want) != len(files)+1 {
		t.Fatalf("upstream named %d pods, want %d: %s", len(want), len(files)+1, out)
	}
	sources := map[string][]byte{url: served}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sources[f] = data
	}
	got := 0
	for src, data := range sources {
		pods, err := manifest.Decode(data, src, node, manifest.Options{})
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		for _, p := range pods {
			got++
			key := src + " " + p.Name
			if w, ok := want[key]; !ok {
				t.Errorf("%s: upstream has no pod %s (%s)", src, p.Name, out)
			} else if string(p.UID) != w {
				t.Errorf("%s: UID %s, upstream's %s", key, p.UID, w)
			}
		}
	}
	if got != len(want) {
		t.Errorf("%d pods decoded, upstream %d", got, len(want))
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
