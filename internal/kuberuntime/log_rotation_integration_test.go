//go:build linux

package kuberuntime

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
)

// These tests run the project's binary as a shim-only dockershim against the real
// dockerd and fail when dockerd does not answer. They create one host-network pod
// (uid prefix rc-rot-) and remove it.

const rcTestImage = "kubelet-dockershim/busybox:latest"

// rcShim is a running shim-only binary and CRI clients for it.
type rcShim struct {
	runtime internalapi.RuntimeService
	images  internalapi.ImageManagerService
	dir     string
}

func startRCShim(t *testing.T) *rcShim {
	t.Helper()
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Fatalf("dockerd is required: %v: %s", err, out)
	}
	bin := filepath.Join(t.TempDir(), "kubelet")
	if out, err := exec.Command("go", "build", "-o", bin, "../..").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir, err := os.MkdirTemp("", "rcrot") // short: the socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	netd := filepath.Join(dir, "net.d")
	if err := os.MkdirAll(netd, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := `{"cniVersion":"1.0.0","name":"rcrot","plugins":[{"type":"bridge","bridge":"rcrot0","isGateway":true,"ipMasq":false,` +
		`"ipam":{"type":"host-local","ranges":[[{"subnet":"10.231.47.0/24"}]]}}]}`
	if err := os.WriteFile(filepath.Join(netd, "10-rcrot.conflist"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "cri.sock")
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "--experimental-dockershim", "--container-runtime-endpoint=unix://"+sock,
		"--experimental-dockershim-root-directory="+filepath.Join(dir, "root"), "--cni-conf-dir="+netd,
		"--cni-bin-dir=/usr/lib/cni", "--cni-cache-dir="+filepath.Join(dir, "cache"), "--v=4")
	cmd.Stderr = &stderr
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("dockershim output:\n%s", stderr.String())
		}
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopRCShim(t, cmd) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shim socket did not appear; stderr:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint("unix://" + sock).WithConnectionTimeout(30 * time.Second).Build(ctx)
	if err != nil {
		t.Fatalf("runtime client: %v", err)
	}
	is, err := remote.NewRemoteImageServiceBuilder().WithEndpoint("unix://" + sock).WithConnectionTimeout(30 * time.Second).Build(ctx)
	if err != nil {
		t.Fatalf("image client: %v", err)
	}
	return &rcShim{runtime: rs, images: is, dir: dir}
}

// stopRCShim stops the shim this test started, by its PID.
func stopRCShim(t *testing.T, cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Errorf("shim did not exit after SIGTERM; killing pid %d", cmd.Process.Pid)
		_ = cmd.Process.Kill()
		<-done
	}
}

// rcLineNumbers returns the N of every "line N" entry of CRI log content.
func rcLineNumbers(t *testing.T, content string) []int {
	t.Helper()
	var out []int
	sc := bufio.NewScanner(strings.NewReader(content))
	for sc.Scan() {
		msg, err := parseLogLine(append(sc.Bytes(), '\n'))
		if err != nil {
			t.Fatalf("unparsable log line %q: %v", sc.Text(), err)
		}
		fields := strings.Fields(string(msg.content))
		if len(fields) < 2 || fields[0] != "line" {
			t.Fatalf("unexpected log content %q", msg.content)
		}
		n, err := strconv.Atoi(fields[1])
		if err != nil {
			t.Fatalf("unexpected log content %q", msg.content)
		}
		out = append(out, n)
	}
	return out
}

// rcCheckNoneLost fails unless nums holds every number from its first to its last,
// in order. Repeats are tolerated (and logged): every dockershim instance on the
// host copies the logs of every managed container, so a shim that another test
// starts meanwhile appends a second copy of some lines to the file it opened.
func rcCheckNoneLost(t *testing.T, what string, nums []int) {
	t.Helper()
	if len(nums) == 0 {
		t.Fatalf("%s: no lines", what)
	}
	repeats := 0
	highest := nums[0]
	for i := 1; i < len(nums); i++ {
		switch n := nums[i]; {
		case n == highest+1:
			highest = n
		case n <= highest:
			repeats++
		default:
			t.Fatalf("%s: line %d follows line %d: lines %d..%d lost", what, n, highest, highest+1, n-1)
		}
	}
	if repeats > 0 {
		t.Logf("%s: %d repeated lines (another dockershim instance copying the same container's log)", what, repeats)
	}
}

// TestIntegrationLogRotationAndReadLogs rotates the log of a real container that
// writes fast, through the dockershim: the rotated files, together with the live one,
// hold every line, in order; old ones are compressed and pruned; ReadLogs
// follows the log across a rotation until the container stops.
func TestIntegrationLogRotationAndReadLogs(t *testing.T) {
	shim := startRCShim(t)
	helper := &rcHelper{}
	m, err := New(Options{Runtime: shim.runtime, Images: shim.images, Helper: helper, Logger: zaptest.NewLogger(t),
		PodLogsDir: filepath.Join(shim.dir, "logs"), RuntimeName: "docker", CPUCFSQuota: true, MachineMemoryBytes: 8 << 30})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "rc-rotation", Namespace: "default", UID: k8stypes.UID(fmt.Sprintf("rc-rot-%d-%d", os.Getpid(), time.Now().UnixNano()))},
		Spec: v1.PodSpec{HostNetwork: true, SecurityContext: &v1.PodSecurityContext{}, Containers: []v1.Container{{
			Name: "talker", Image: rcTestImage, ImagePullPolicy: v1.PullIfNotPresent,
			Command: []string{"sh", "-c", `i=0; while true; do echo "line $i $(PAD)"; i=$((i+1)); sleep 0.002; done`},
		}}},
	}
	helper.opts = &RunContainerOptions{Envs: []EnvVar{{Name: "PAD", Value: strings.Repeat("p", 100)}}}
	sbCfg, err := m.generatePodSandboxConfig(pod, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sbCfg.GetLogDirectory(), 0o755); err != nil {
		t.Fatal(err)
	}
	sbID, err := shim.runtime.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		_ = shim.runtime.StopPodSandbox(cctx, sbID)
		if err := shim.runtime.RemovePodSandbox(cctx, sbID); err != nil {
			t.Errorf("RemovePodSandbox: %v", err)
		}
	})
	c := &pod.Spec.Containers[0]
	imageRef, _, err := m.ensureImageExists(ctx, pod, c, nil, sbCfg)
	if err != nil {
		t.Fatalf("ensureImageExists: %v", err)
	}
	cCfg, cleanup, err := m.generateContainerConfig(ctx, c, pod, 0, "", nil, imageRef)
	cleanup()
	if err != nil {
		t.Fatalf("generateContainerConfig: %v", err)
	}
	id, err := shim.runtime.CreateContainer(ctx, sbID, cCfg, sbCfg)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if err := shim.runtime.StartContainer(ctx, id); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	logPath := filepath.Join(sbCfg.GetLogDirectory(), cCfg.GetLogPath())

	r := newLogRotator(shim.runtime, 4096, 3, zaptest.NewLogger(t))
	rotateRounds(ctx, t, r, logPath, 3)
	checkRotatedFiles(t, logPath)

	// ReadLogs: the last lines, then follow across one more rotation until the
	// container stops.
	time.Sleep(300 * time.Millisecond) // let the new live file get a few lines
	var tail bytes.Buffer
	if err := m.ReadLogs(ctx, logPath, id, &LogOptions{Tail: 5}, &tail, &tail); err != nil {
		t.Fatalf("ReadLogs: %v", err)
	}
	// The container keeps writing: lines appended while reading come too.
	tailed := rcLineNumbers(t, rewrapCRI(tail.String()))
	if len(tailed) < 5 || len(tailed) > 50 {
		t.Fatalf("tail 5 gave %d lines: %q", len(tailed), tail.String())
	}
	rcCheckNoneLost(t, "tail", tailed)
	out := &rcBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- m.ReadLogs(ctx, logPath, id, &LogOptions{Tail: 1, Follow: true, Timestamps: true}, out, out)
	}()
	rotateRounds(ctx, t, r, logPath, 1)
	time.Sleep(300 * time.Millisecond)
	if err := shim.runtime.StopContainer(ctx, id, 0); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ReadLogs follow: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("ReadLogs follow did not return after the container stopped")
	}
	followed := rcLineNumbers(t, rewrapCRI(out.String()))
	rcCheckNoneLost(t, "followed output", followed)
	if len(followed) < 20 {
		t.Errorf("followed only %d lines across a rotation", len(followed))
	}
}

// rotateRounds runs rotation rounds, a little over a second apart (rotated names
// have second resolution), until n rotations happened.
func rotateRounds(ctx context.Context, t *testing.T, r *logRotator, logPath string, n int) {
	t.Helper()
	rotations := 0
	deadline := time.Now().Add(30 * time.Second)
	for rotations < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d rotations happened; %s", rotations, n, rotationDiagnostics(logPath))
		}
		time.Sleep(1100 * time.Millisecond)
		before := snapshotNames(logPath)
		r.rotateAll(ctx)
		if f := r.failures; len(f) > 0 {
			t.Fatalf("rotation failed: %+v", f)
		}
		if !equalStrings(snapshotNames(logPath), before) {
			rotations++
		}
	}
}

// rotationDiagnostics describes the log files and the container, for a failure.
func rotationDiagnostics(logPath string) string {
	var b strings.Builder
	for _, name := range append(snapshotNames(logPath), logPath) {
		if fi, err := os.Stat(name); err == nil {
			fmt.Fprintf(&b, "%s: %d bytes; ", filepath.Base(name), fi.Size())
		}
	}
	out, _ := exec.Command("docker", "ps", "-a", "--filter", "name=rc-rotation", "--format", "{{.Names}}: {{.Status}}").CombinedOutput()
	return b.String() + "containers: " + strings.TrimSpace(string(out))
}

func snapshotNames(logPath string) []string {
	matches, _ := filepath.Glob(logPath + ".*")
	sort.Strings(matches)
	return matches
}

func equalStrings(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

// checkRotatedFiles checks the files of a rotated log: at most 3 in all, the older
// rotated ones compressed, the newest uncompressed, and every line exactly once in
// order from the oldest file to the live one.
func checkRotatedFiles(t *testing.T, logPath string) {
	t.Helper()
	rotated := snapshotNames(logPath)
	if len(rotated) != 2 {
		t.Fatalf("rotated files %v, want 2 (3 files with the live one)", rotated)
	}
	if !strings.HasSuffix(rotated[0], ".gz") || strings.HasSuffix(rotated[1], ".gz") {
		t.Fatalf("rotated files %v: want the older compressed, the newest not", rotated)
	}
	all := rcGunzip(t, rotated[0]) + rcFileContent(t, rotated[1]) + rcFileContent(t, logPath)
	rcCheckNoneLost(t, "rotated and live logs", rcLineNumbers(t, all))
}

// rewrapCRI turns ReadLogs output ("[timestamp ]line N ...") back into CRI lines for
// rcLineNumbers.
func rewrapCRI(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if l == "" {
			continue
		}
		if !strings.HasPrefix(l, "line ") {
			_, l, _ = strings.Cut(l, " ") // drop the timestamp
		}
		b.WriteString("2024-01-01T00:00:00Z stdout F " + l + "\n")
	}
	return b.String()
}
