package containerlog

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// swapFixture is a log root holding one pod log directory, and a directory
// outside the root that a symbolic link put in place of the pod's directory
// points at (what a process that can write the log root's parent, a log
// agent mounting /var/log, can do). outside/app/0.log holds an unterminated
// line, which a truncation through the link would cut.
type swapFixture struct {
	root, podDir, path, outside string
	before                      map[string]string // outside's files before the copier ran
}

func newSwapFixture(t *testing.T) *swapFixture {
	t.Helper()
	f := &swapFixture{root: filepath.Join(t.TempDir(), "pods"), outside: t.TempDir()}
	f.podDir = filepath.Join(f.root, "ns_pod_uid")
	f.path = filepath.Join(f.podDir, "app", "0.log")
	for _, d := range []string{filepath.Join(f.podDir, "app"), filepath.Join(f.outside, "app")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.outside, "app", "0.log"), []byte("precious\nno newline"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.before = treeOf(t, f.outside)
	return f
}

// swap moves the pod's log directory aside and puts a link to outside in its place.
func (f *swapFixture) swap(t *testing.T) {
	t.Helper()
	if err := os.Rename(f.podDir, f.podDir+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(f.outside, f.podDir); err != nil {
		t.Fatal(err)
	}
}

// checkOutside fails the test when anything below outside changed.
func (f *swapFixture) checkOutside(t *testing.T) {
	t.Helper()
	if got := treeOf(t, f.outside); !reflect.DeepEqual(got, f.before) {
		t.Errorf("the copier wrote outside the log root through the link:\n got %q\nwant %q", got, f.before)
	}
}

// treeOf maps every file and directory below dir to its content ("/" for a directory).
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	tree := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			tree[rel] = "/"
			return nil
		}
		b, err := os.ReadFile(p)
		tree[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// The pod's log directory is a link out of the log root before the copier
// starts: it neither creates, truncates nor writes anything through it.
func TestCopierRefusesLinkedPodDirBeforeOpen(t *testing.T) {
	t.Parallel()
	f := newSwapFixture(t)
	f.swap(t)
	src := &fakeSource{results: []func(context.Context) (io.ReadCloser, error){
		canned(muxStream(message{stdoutID, t0, "hello\n"})),
	}}
	followToEnd(t, newManagerAt(t, src, f.root), f.path, false)
	f.checkOutside(t)
}

// The pod's log directory becomes a link out of the log root after the copier
// opened its file, before the kubelet asks for a reopen (after rotation): the
// reopen fails rather than create a file through the link.
func TestCopierRefusesLinkedPodDirOnReopen(t *testing.T) {
	t.Parallel()
	f := newSwapFixture(t)
	if err := os.Remove(filepath.Join(f.outside, "app", "0.log")); err != nil {
		t.Fatal(err) // O_CREATE through the link is what to catch here
	}
	f.before = treeOf(t, f.outside)
	pr, pw := io.Pipe()
	src := &fakeSource{results: []func(context.Context) (io.ReadCloser, error){
		func(context.Context) (io.ReadCloser, error) { return pr, nil },
	}}
	m := newManagerAt(t, src, f.root)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m.Follow(ctx, "c1", f.path, false)
	write := func(i int, line string) {
		t.Helper()
		if _, err := pw.Write(frame(stdoutID, dockerTS(t0.Add(time.Duration(i)))+" "+line+"\n")); err != nil {
			t.Fatal(err)
		}
	}
	write(1, "before")
	waitFor(t, "the first line", fileContains(f.path, "before"))
	f.swap(t)
	err := m.Reopen("c1")
	write(2, "after")
	pw.Close()
	if err := m.Wait(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	f.checkOutside(t)
	if err == nil {
		t.Error("Reopen through a link out of the log root succeeded")
	}
}

// The pod's log directory becomes a link out of the log root while the file
// cannot be written (a full disk: /dev/full at the log path): the repair
// neither truncates nor creates a file through the link.
func TestCopierRefusesLinkedPodDirOnRepair(t *testing.T) {
	t.Parallel()
	f := newSwapFixture(t)
	if err := unix.Mknod(f.path, unix.S_IFCHR|0o640, int(unix.Mkdev(1, 7))); err != nil {
		t.Fatalf("mknod /dev/full at the log path: %v", err)
	}
	src := &fakeSource{
		results: []func(context.Context) (io.ReadCloser, error){canned(muxStream(message{stdoutID, t0, "hello\n"}))},
		states:  []func() (libdocker.ContainerJSON, error){running},
	}
	m := newManagerAt(t, src, f.root)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m.Follow(ctx, "c1", f.path, false)
	waitFor(t, "a copy that failed to write", func() bool { return len(src.Calls()) >= 1 })
	f.swap(t)
	calls := len(src.Calls())
	waitFor(t, "two repairs after the swap", func() bool { return len(src.Calls()) >= calls+2 })
	m.Stop("c1")
	if err := m.Wait(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	f.checkOutside(t)
}

// A link that stays inside the log root (to another pod's log directory) is
// refused as well: the copier would write into that pod's log.
func TestCopierRefusesLinkInsideLogRoot(t *testing.T) {
	t.Parallel()
	f := newSwapFixture(t)
	other := filepath.Join(f.root, "ns_other_uid")
	if err := os.MkdirAll(filepath.Join(other, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(f.podDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, f.podDir); err != nil {
		t.Fatal(err)
	}
	before := treeOf(t, other)
	src := &fakeSource{results: []func(context.Context) (io.ReadCloser, error){
		canned(muxStream(message{stdoutID, t0, "hello\n"})),
	}}
	followToEnd(t, newManagerAt(t, src, f.root), f.path, false)
	if got := treeOf(t, other); !reflect.DeepEqual(got, before) {
		t.Errorf("the copier wrote into another pod's log directory: %q", got)
	}
}

// A log path outside the log root (a CRI client with its own log directory)
// is still copied, below the path's own directory.
func TestFollowOutsideLogRoot(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "app", "0.log")
	src := &fakeSource{results: []func(context.Context) (io.ReadCloser, error){
		canned(muxStream(message{stdoutID, t0, "hello\n"})),
	}}
	followToEnd(t, newManagerAt(t, src, filepath.Join(t.TempDir(), "pods")), path, false)
	if got := joinLines(readCRIFile(t, path)); !reflect.DeepEqual(got["stdout"], []string{"hello"}) {
		t.Fatalf("lines = %q", got)
	}
}
