//go:build linux

package streaming

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/dockerd"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// Test fixtures shared by the integration tests, which run against the real dockerd.
const (
	testImage      = "streaming-test-busybox:latest"
	testLabel      = "io.kubelet-dockershim.test=streaming"
	testBusyboxBin = "/bin/busybox"
)

// testApplets are the busybox applets the test image links into /bin.
var testApplets = []string{"sh", "echo", "cat", "sleep", "nc", "httpd", "ps", "true", "mkdir", "wget", "stty", "grep"}

// TestMain runs the package's tests against the host's dockerd, or a private
// daemon of the engine $DOCKERSHIM_TEST_DOCKER names (dockerd.RunMain).
func TestMain(m *testing.M) { os.Exit(dockerd.RunMain(m)) }

// testDocker returns a real libdocker client, failing the test if dockerd is unreachable.
func testDocker(tb testing.TB) *libdocker.Client {
	tb.Helper()
	d, err := libdocker.New(libdocker.Options{Endpoint: dockerd.Endpoint()})
	if err != nil {
		tb.Fatalf("docker client: %v", err)
	}
	tb.Cleanup(func() { _ = d.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Ping(ctx); err != nil {
		tb.Fatalf("dockerd at %s is required: %v", dockerd.Endpoint(), err)
	}
	return d
}

// dockerCLI runs the docker CLI with a bound, returning its trimmed stdout.
func dockerCLI(tb testing.TB, stdin []byte, args ...string) (string, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// ensureTestImage imports the busybox test image unless it already exists.
func ensureTestImage(tb testing.TB) {
	tb.Helper()
	if _, err := dockerCLI(tb, nil, "image", "inspect", "--format", "{{.Id}}", testImage); err == nil {
		return
	}
	rootfs, err := busyboxRootfs()
	if err != nil {
		tb.Fatalf("build test image rootfs: %v", err)
	}
	if _, err := dockerCLI(tb, rootfs, "import", "--change", "LABEL "+testLabel, "-", testImage); err != nil {
		tb.Fatalf("import test image: %v", err)
	}
}

// busyboxRootfs returns a tar holding /bin/busybox and its applet symlinks.
func busyboxRootfs() ([]byte, error) {
	bin, err := os.ReadFile(testBusyboxBin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdrs := []*tar.Header{{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755}}
	for _, a := range testApplets {
		hdrs = append(hdrs, &tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777})
	}
	if err := tw.WriteHeader(hdrs[0]); err != nil {
		return nil, err
	}
	if err := tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin))}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	for _, h := range hdrs[1:] {
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// runTestContainer starts a labelled container of the test image (no network but
// loopback) and removes it by ID at test end. runArgs go before the image.
func runTestContainer(tb testing.TB, runArgs []string, cmd ...string) string {
	tb.Helper()
	ensureTestImage(tb)
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	name := "streaming-test-" + hex.EncodeToString(suffix)
	args := append([]string{"run", "-d", "--name", name, "--label", testLabel, "--network", "none"}, runArgs...)
	args = append(args, testImage)
	args = append(args, cmd...)
	// Registered before the run: a run that fails after creating the container must
	// not leave it behind.
	tb.Cleanup(func() { _, _ = dockerCLI(tb, nil, "rm", "-f", name) })
	id, err := dockerCLI(tb, nil, args...)
	if err != nil {
		tb.Fatalf("run test container: %v", err)
	}
	return id
}

// sleeper starts a container that just sleeps.
func sleeper(tb testing.TB) string {
	tb.Helper()
	return runTestContainer(tb, nil, "/bin/busybox", "sleep", "3600")
}
