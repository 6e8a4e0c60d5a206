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
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/shim"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/waitfor"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// These tests run the project's binary as a shim-only dockershim against the real
// dockerd and fail when dockerd does not answer. They create one host-network pod
// (uid prefix rc-rot-) and remove it.

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
	s := kubelet.Start(t, shim.Options{Args: []string{"--v=4"}})
	rt, images := s.Dial(t, 30*time.Second)
	helper := &rcHelper{}
	m, err := New(Options{Runtime: rt, Images: images, Helper: helper, Logger: zaptest.NewLogger(t),
		PodLogsDir: filepath.Join(s.Dir, "logs"), RuntimeName: "docker", CPUCFSQuota: true, MachineMemoryBytes: 8 << 30})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "rc-rotation", Namespace: "default", UID: k8stypes.UID(fmt.Sprintf("rc-rot-%d-%d", os.Getpid(), time.Now().UnixNano()))},
		Spec: v1.PodSpec{HostNetwork: true, SecurityContext: &v1.PodSecurityContext{}, Containers: []v1.Container{{
			Name: "talker", Image: integrationImage, ImagePullPolicy: v1.PullIfNotPresent,
			Command: []string{"sh", "-c", `i=0; while true; do echo "line $i $(PAD)"; i=$((i+1)); sleep 0.002; done`},
		}}},
	}
	helper.opts = &kubecontainer.RunContainerOptions{Envs: []kubecontainer.EnvVar{{Name: "PAD", Value: strings.Repeat("p", 100)}}}
	sbCfg, err := m.generatePodSandboxConfig(pod, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sbCfg.GetLogDirectory(), 0o755); err != nil {
		t.Fatal(err)
	}
	sbID, err := rt.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		_ = rt.StopPodSandbox(cctx, sbID)
		if err := rt.RemovePodSandbox(cctx, sbID); err != nil {
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
	id, err := rt.CreateContainer(ctx, sbID, cCfg, sbCfg)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	logPath := filepath.Join(sbCfg.GetLogDirectory(), cCfg.GetLogPath())

	r := newLogRotator(rt, 4096, 3, zaptest.NewLogger(t))
	rotateRounds(ctx, t, r, logPath, 3)
	checkRotatedFiles(t, logPath)

	// ReadLogs: the last lines, then follow across one more rotation until the
	// container stops.
	waitfor.Condition(t, func() bool { // let the new live file get a few lines
		data, err := os.ReadFile(logPath)
		return err == nil && bytes.Count(data, []byte("\n")) >= 5
	})
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
	if err := rt.StopContainer(ctx, id, 0); err != nil {
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
