package podsource

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

func podManifest(name, image string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  containers:\n  - name: c\n    image: %s\n", name, image)
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeAtomic replaces path by renaming a temporary file over it, as editors and
// configuration tools do.
func writeAtomic(t *testing.T, path, data string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	writeFile(t, tmp, data)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// waitPods reads updates until the file source's pod names are want (sorted), and
// returns the pods; it fails after updateWait.
func waitPods(t *testing.T, s *Source, want ...string) map[string]*v1.Pod {
	t.Helper()
	slices.Sort(want)
	deadline := time.After(updateWait)
	var last []string
	for {
		select {
		case u := <-s.Updates():
			if u.Op != kubecontainer.SET {
				t.Fatalf("op %v, want SET", u.Op)
			}
			last = sortedNames(u.Pods)
			if slices.Equal(last, want) || (len(last) == 0 && len(want) == 0) {
				byName := map[string]*v1.Pod{}
				for _, p := range u.Pods {
					byName[p.Name] = p
				}
				return byName
			}
		case <-deadline:
			t.Fatalf("pods %v, want %v within %v", last, want, updateWait)
		}
	}
}

// TestFileSourceDirectory checks pickup through inotify: the periodic re-read is set to an
// hour, so every update within the bounded wait came from a watch event.
func TestFileSourceDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, events := startSource(t, Options{NodeName: "n1", ManifestPath: dir, FileCheckFrequency: time.Hour})

	u := nextUpdate(t, s)
	if u.Source != kubecontainer.FileSource || len(u.Pods) != 0 {
		t.Fatalf("first update %s %v, want an empty file state", u.Source, podNames(u.Pods))
	}
	if !s.SeenAllSources() {
		t.Fatal("SeenAllSources false after the first state")
	}

	writeFile(t, filepath.Join(dir, "a.yaml"), podManifest("a", "busybox:1"))
	pods := waitPods(t, s, "a-n1")
	uidA := pods["a-n1"].UID

	writeFile(t, filepath.Join(dir, "broken.yaml"), "apiVersion: v1\nkind: Pod\n  metadata: [")
	writeFile(t, filepath.Join(dir, "b.json"), `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"b"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`)
	pods = waitPods(t, s, "a-n1", "b-n1")
	events.waitFor(t, "FailedToParseManifest", filepath.Join(dir, "broken.yaml"), "not valid YAML")
	seenB := pods["b-n1"].Annotations[kubecontainer.ConfigFirstSeenAnnotationKey]
	uidB := pods["b-n1"].UID

	writeAtomic(t, filepath.Join(dir, "a.yaml"), podManifest("a", "busybox:2"))
	pods = waitPods(t, s, "a-n1", "b-n1")
	for pods["a-n1"].UID == uidA { // a burst may deliver the old content first
		pods = waitPods(t, s, "a-n1", "b-n1")
	}
	if pods["b-n1"].UID != uidB || pods["b-n1"].Annotations[kubecontainer.ConfigFirstSeenAnnotationKey] != seenB {
		t.Errorf("unchanged pod b changed: UID %s seen %s", pods["b-n1"].UID, pods["b-n1"].Annotations[kubecontainer.ConfigFirstSeenAnnotationKey])
	}
	if got := pods["a-n1"].Spec.Containers[0].Image; got != "busybox:2" {
		t.Errorf("edited pod image %q", got)
	}

	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	waitPods(t, s, "b-n1")

	// Hidden files and subdirectories are ignored.
	writeFile(t, filepath.Join(dir, ".hidden.yaml"), podManifest("hidden", "busybox"))
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "sub", "c.yaml"), podManifest("c", "busybox"))
	noUpdate(t, s, 500*time.Millisecond)
}

func TestFileSourceSingleFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "static.yaml")
	s, _ := startSource(t, Options{NodeName: "n1", ManifestPath: path, FileCheckFrequency: time.Hour})

	waitPods(t, s) // the file does not exist yet: an empty state
	writeFile(t, path, podManifest("static", "busybox:1"))
	uid := waitPods(t, s, "static-n1")["static-n1"].UID

	writeAtomic(t, path, podManifest("static", "busybox:2"))
	pods := waitPods(t, s, "static-n1")
	for pods["static-n1"].UID == uid {
		pods = waitPods(t, s, "static-n1")
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitPods(t, s)
}

func TestFileSourceDuplicateNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "1.yaml"), podManifest("web", "busybox:1"))
	writeFile(t, filepath.Join(dir, "2.yaml"), podManifest("web", "busybox:2"))
	s, events := startSource(t, Options{NodeName: "n1", ManifestPath: dir, FileCheckFrequency: time.Hour})

	pods := waitPods(t, s, "web-n1")
	if got := pods["web-n1"].Spec.Containers[0].Image; got != "busybox:1" {
		t.Errorf("kept the pod of the later file (image %q)", got)
	}
	events.waitFor(t, filepath.Join(dir, "2.yaml"), "duplicates")
}

// TestFileSourcePeriodicReread drives the re-read the ticker runs, without inotify:
// changes show up at the next read and an unchanged state is not sent again.
func TestFileSourcePeriodicReread(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := New(Options{NodeName: "n1", ManifestPath: dir, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	f := newFileSource(s) // no watcher: only explicit syncs read
	ctx := context.Background()

	tests := []struct {
		desc   string
		change func()
		want   []string // nil = no update expected
	}{
		{"first read sends the empty state", func() {}, []string{}},
		{"unchanged state is not sent", func() {}, nil},
		{"new file", func() { writeFile(t, filepath.Join(dir, "a.yaml"), podManifest("a", "busybox")) }, []string{"a-n1"}},
		{"broken file keeps other pods", func() { writeFile(t, filepath.Join(dir, "z.yaml"), "kind: [") }, nil},
		{"second file", func() { writeFile(t, filepath.Join(dir, "b.yaml"), podManifest("b", "busybox")) }, []string{"a-n1", "b-n1"}},
		{"removed file", func() { os.Remove(filepath.Join(dir, "a.yaml")) }, []string{"b-n1"}},
		{"removed directory", func() { os.RemoveAll(dir) }, []string{}},
	}
	for _, tc := range tests {
		tc.change()
		f.sync(ctx)
		select {
		case u := <-s.Updates():
			if tc.want == nil {
				t.Fatalf("%s: unexpected update %v", tc.desc, podNames(u.Pods))
			}
			if got := sortedNames(u.Pods); !slices.Equal(got, tc.want) {
				t.Fatalf("%s: pods %v, want %v", tc.desc, got, tc.want)
			}
		default:
			if tc.want != nil {
				t.Fatalf("%s: no update, want %v", tc.desc, tc.want)
			}
		}
	}
}
