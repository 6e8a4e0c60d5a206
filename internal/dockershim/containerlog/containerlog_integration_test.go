//go:build linux

package containerlog

import (
	"archive/tar"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/dockerd"
)

// These tests run against the real dockerd at unix:///var/run/docker.sock (or
// $DOCKER_HOST, or a private daemon as TestMain starts for $DOCKERSHIM_TEST_DOCKER)
// and fail when it does not answer. They create a busybox image from the
// host's /bin/busybox and containers labelled testLabel, and remove their containers.

const (
	testImage = "containerlog-test-busybox:latest"
	testLabel = "io.kubelet-dockershim.test=containerlog"
)

// busyboxApplets are linked into the test image's /bin.
var busyboxApplets = []string{"sh", "echo", "printf", "head", "tr", "sleep"}

// TestMain runs the package's tests against the host's dockerd, or a private
// daemon of the engine $DOCKERSHIM_TEST_DOCKER names (dockerd.RunMain).
func TestMain(m *testing.M) { os.Exit(dockerd.RunMain(m)) }

func dockerEndpoint() string { return dockerd.Endpoint() }

// docker runs the docker CLI and returns its trimmed stdout.
func docker(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+dockerEndpoint())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// dockerClient returns a real client after checking that dockerd answers.
func dockerClient(t *testing.T) *libdocker.Client {
	t.Helper()
	c, err := libdocker.New(libdocker.Options{Endpoint: dockerEndpoint()})
	if err != nil {
		t.Fatalf("libdocker.New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("dockerd does not answer at %s: %v", dockerEndpoint(), err)
	}
	return c
}

// ensureImage imports a FROM-scratch image holding the host's busybox, unless present.
func ensureImage(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if exec.CommandContext(ctx, "docker", "image", "inspect", testImage).Run() == nil {
		return
	}
	tarPath := filepath.Join(t.TempDir(), "busybox.tar")
	if err := writeBusyboxTar(tarPath); err != nil {
		t.Fatalf("build image tar: %v", err)
	}
	docker(t, "import", "--change", "LABEL "+testLabel, tarPath, testImage)
}

func writeBusyboxTar(path string) error {
	bin, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return fmt.Errorf("busybox-static is required: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	hdrs := []*tar.Header{{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755}, {Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777}}
	for _, h := range hdrs {
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin))}); err != nil {
		return err
	}
	if _, err := tw.Write(bin); err != nil {
		return err
	}
	for _, a := range busyboxApplets {
		if err := tw.WriteHeader(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777}); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// runContainer starts a detached, labelled container running script and removes it
// when the test ends.
func runContainer(t *testing.T, tty bool, script string) string {
	t.Helper()
	name := fmt.Sprintf("containerlog-it-%d-%d", os.Getpid(), time.Now().UnixNano())
	args := []string{"run", "-d", "--name", name, "--label", testLabel, "--log-driver", "json-file",
		"--env", "PATH=/bin"}
	if tty {
		args = append(args, "-t")
	}
	args = append(args, testImage, "/bin/sh", "-c", script)
	// Registered before the run: a run that fails after creating the container
	// (e.g. a network error at start) must not leave it behind.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "docker", "rm", "-f", name).CombinedOutput(); err != nil && !strings.Contains(string(out), "No such container") {
			t.Errorf("remove container %s: %v: %s", name, err, out)
		}
	})
	return docker(t, args...)
}

func TestIntegrationFollowExitedContainer(t *testing.T) {
	c := dockerClient(t)
	ensureImage(t)
	id := runContainer(t, false, `for i in 1 2 3 4 5; do echo out-$i; echo err-$i >&2; done; `+
		`head -c 40000 /dev/zero | tr '\000' x; echo; echo after-long; printf tail-no-newline`)

	m := newManager(t, c)
	path := filepath.Join(t.TempDir(), "app", "0.log")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.Follow(ctx, id, path, false)
	if err := m.Wait(ctx, id); err != nil {
		t.Fatalf("Wait: %v", err)
	}

	entries := readCRIFile(t, path)
	got := joinLines(entries)
	want := map[string][]string{
		"stdout": {"out-1", "out-2", "out-3", "out-4", "out-5", strings.Repeat("x", 40000), "after-long",
			"tail-no-newline<partial>"},
		"stderr": {"err-1", "err-2", "err-3", "err-4", "err-5"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("lines = %.400q\nwant %.400q", got, want)
	}
	// Docker's two copier goroutines may order stdout and stderr messages a few
	// microseconds out of timestamp order; within a stream time never goes back.
	partials := 0
	prev := map[string]time.Time{}
	for i, e := range entries {
		if e.partial {
			partials++
		}
		if e.ts.Before(prev[e.stream]) {
			t.Errorf("entry %d (%s) goes back in time: %v after %v", i, e.stream, e.ts, prev[e.stream])
		}
		prev[e.stream] = e.ts
	}
	if partials < 3 { // two for the long line, one for the unterminated end
		t.Fatalf("found %d partial entries, want at least 3", partials)
	}
}

func TestIntegrationFollowTTY(t *testing.T) {
	c := dockerClient(t)
	ensureImage(t)
	id := runContainer(t, true, `echo tty-1; head -c 40000 /dev/zero | tr '\000' y; echo; echo tty-2`)

	m := newManager(t, c)
	path := filepath.Join(t.TempDir(), "0.log")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.Follow(ctx, id, path, true)
	if err := m.Wait(ctx, id); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	got := joinLines(readCRIFile(t, path))
	// A TTY turns "\n" into "\r\n"; the CRI content keeps the "\r" as containerd does.
	want := map[string][]string{"stdout": {"tty-1\r", strings.Repeat("y", 40000) + "\r", "tty-2\r"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("lines = %.300q\nwant %.300q", got, want)
	}
}

func TestIntegrationResumeAfterRestart(t *testing.T) {
	c := dockerClient(t)
	ensureImage(t)
	const n = 60 // 6 s of output: the first manager starts well within it
	id := runContainer(t, false, fmt.Sprintf(
		`i=0; while [ $i -lt %d ]; do echo line-$i; echo err-$i >&2; i=$((i+1)); sleep 0.1; done`, n))
	path := filepath.Join(t.TempDir(), "0.log")

	// The first shim follows part of the output, then stops (shim restart).
	m1 := newManager(t, c)
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	m1.Follow(ctx1, id, path, false)
	waitFor(t, "a few lines from the first manager", fileContains(path, "line-3"))
	cancel1()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := m1.Wait(wctx, id); err != nil {
		t.Fatalf("Wait for the first manager: %v", err)
	}
	before := joinLines(readCRIFile(t, path))
	if k := len(before["stdout"]); k >= n {
		t.Fatalf("the first manager copied all %d lines before it was stopped; the test proves nothing", k)
	}

	// The second shim resumes on the same file.
	m2 := newManager(t, c)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	m2.Follow(ctx2, id, path, false)
	if err := m2.Wait(ctx2, id); err != nil {
		t.Fatalf("Wait for the second manager: %v", err)
	}

	var wantOut, wantErr []string
	for i := range n {
		wantOut = append(wantOut, fmt.Sprintf("line-%d", i))
		wantErr = append(wantErr, fmt.Sprintf("err-%d", i))
	}
	got := joinLines(readCRIFile(t, path))
	if !reflect.DeepEqual(got["stdout"], wantOut) || !reflect.DeepEqual(got["stderr"], wantErr) {
		t.Fatalf("after resume: stdout %q\nstderr %q\nwant every line exactly once (first manager copied %d)",
			got["stdout"], got["stderr"], len(before["stdout"]))
	}
}
