package kuberuntime

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/faultinject"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// Container log rotation, as the upstream kubelet's container log manager does it:
// when the live log of a running container (<dir>/<n>.log) reaches the size limit it
// is renamed to <n>.log.<UTC timestamp> and the runtime is asked to reopen the log
// (creating a new live file). Rotated files are gzip-compressed (<name>.gz) one round
// later, so the newest rotated file stays readable while log shippers finish it, and
// the oldest are removed so that at most maxFiles files exist, the live one included.
const (
	logRotationInterval    = 10 * time.Second
	rotatedTimestampFormat = "20060102-150405"
	compressedLogSuffix    = ".gz"
	tmpLogSuffix           = ".tmp"
	// A container whose rotation failed is retried after a back-off doubling from
	// rotationRetryInitial to rotationRetryMax, so a broken container (or runtime)
	// does not produce an error every round.
	rotationRetryInitial = 10 * time.Second
	rotationRetryMax     = 5 * time.Minute
)

// logRotationRuntime is what log rotation needs from the runtime.
type logRotationRuntime interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	ReopenContainerLog(ctx context.Context, containerID string) error
}

// rotateLogsLoop rotates container logs every logMonitorInterval (default
// 10s) until ctx ends, with logMaxWorkers containers at a time.
func (m *Manager) rotateLogsLoop(ctx context.Context) {
	r := newLogRotator(m.runtime, m.logMaxSize, m.logMaxFiles, m.logger)
	r.workers = m.logMaxWorkers
	interval := m.logMonitorInterval
	if interval <= 0 {
		interval = logRotationInterval
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		faultinject.Point("kuberuntime.rotateLogs")
		r.rotateAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// logRotator holds the rotation policy and the per-container failure back-off. It is
// used by one goroutine.
type logRotator struct {
	runtime  logRotationRuntime
	maxSize  int64
	maxFiles int
	logger   *zap.Logger
	now      func() time.Time
	// workers is how many containers are rotated at once (<= 1: one).
	workers  int
	mu       sync.Mutex                  // guards failures
	failures map[string]*rotationFailure // by container ID
}

// rotationFailure is a container's streak of failed rotations.
type rotationFailure struct {
	count   int
	retryAt time.Time
}

func newLogRotator(rt logRotationRuntime, maxSize int64, maxFiles int, logger *zap.Logger) *logRotator {
	if maxFiles < 2 {
		maxFiles = 2 // the live file and the one just rotated
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &logRotator{
		runtime:  rt,
		maxSize:  maxSize,
		maxFiles: maxFiles,
		logger:   logger.Named("log-rotation"),
		now:      time.Now,
		failures: map[string]*rotationFailure{},
	}
}

// rotateAll runs one round over the running containers.
func (r *logRotator) rotateAll(ctx context.Context) {
	if r.maxSize <= 0 {
		return
	}
	filter := &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	containers, err := r.runtime.ListContainers(ctx, filter)
	if err != nil {
		if ctx.Err() == nil {
			r.logger.Warn("list running containers for log rotation", zap.Error(err))
		}
		return
	}
	live := make(map[string]bool, len(containers))
	for _, c := range containers {
		live[c.GetId()] = true
	}
	r.mu.Lock()
	for id := range r.failures {
		if !live[id] {
			delete(r.failures, id) // gone or stopped: forget its streak
		}
	}
	r.mu.Unlock()
	if r.workers <= 1 { // the default: no goroutine per round
		for _, c := range containers {
			if ctx.Err() != nil {
				return
			}
			if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
				r.rotateOne(ctx, c.GetId())
			}
		}
		return
	}
	ids := make(chan string)
	var wg sync.WaitGroup
	for range max(r.workers, 1) {
		wg.Go(func() {
			defer logging.HandleCrash(r.logger, "container log rotation")
			for id := range ids {
				r.rotateOne(ctx, id)
			}
		})
	}
	for _, c := range containers {
		if ctx.Err() != nil {
			break
		}
		if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
			ids <- c.GetId()
		}
	}
	close(ids)
	wg.Wait()
}

// rotateOne rotates one container's log if due, tracking failures.
func (r *logRotator) rotateOne(ctx context.Context, id string) {
	r.mu.Lock()
	f := r.failures[id]
	r.mu.Unlock()
	if f != nil && r.now().Before(f.retryAt) {
		return
	}
	err := r.rotateContainer(ctx, id)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		if f != nil {
			r.logger.Info("container log rotation works again", zap.String("containerID", id))
			delete(r.failures, id)
		}
		return
	}
	if ctx.Err() != nil {
		return
	}
	if f == nil {
		f = &rotationFailure{}
		r.failures[id] = f
	}
	f.count++
	delay := rotationRetryInitial << min(f.count-1, 10)
	if delay > rotationRetryMax {
		delay = rotationRetryMax
	}
	f.retryAt = r.now().Add(delay)
	level := zap.DebugLevel
	if f.count == 1 {
		level = zap.WarnLevel
	}
	r.logger.Log(level, "container log rotation failed; retrying later", zap.String("containerID", id),
		zap.Int("failures", f.count), zap.Duration("retryIn", delay), zap.Error(err))
}

// rotateContainer rotates the container's live log when it has reached the size
// limit. A missing live log is recreated by reopening it.
func (r *logRotator) rotateContainer(ctx context.Context, id string) error {
	resp, err := r.runtime.ContainerStatus(ctx, id, false)
	if grpcstatus.Code(err) == codes.NotFound {
		return nil
	}
	if err != nil {
		return fmt.Errorf("container status: %w", err)
	}
	status := resp.GetStatus()
	path := status.GetLogPath()
	if path == "" || status.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil
	}
	if lfi, err := os.Lstat(path); err == nil && lfi.Mode()&fs.ModeSymlink != 0 {
		// A container cri-dockerd or the 1.23 dockershim created (adopted on a
		// switch): its log path links to Docker's json-file log, which Docker
		// writes and rotates by its own log options; renaming the link would
		// only break it.
		return nil
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		// A failed reopen or a restart in the middle of a rotation: get the live
		// file back.
		if err := r.runtime.ReopenContainerLog(ctx, id); err != nil {
			return fmt.Errorf("container log %s is missing and reopening it failed: %w", path, err)
		}
		fi, err = os.Stat(path)
	}
	if err != nil {
		return fmt.Errorf("stat container log: %w", err)
	}
	if fi.Size() < r.maxSize {
		return nil
	}
	return r.rotateLog(ctx, id, path)
}

// rotateLog performs one rotation of the live log at path. Steps:
//  1. remove leftovers of interrupted rounds (temporary files, uncompressed copies
//     of compressed files);
//  2. remove the oldest rotated files beyond maxFiles-2 (room for the live file and
//     the one about to be rotated);
//  3. compress the remaining uncompressed rotated files;
//  4. rename the live file and have the runtime reopen it (renamed back on failure).
func (r *logRotator) rotateLog(ctx context.Context, id, path string) error {
	rotated, err := listRotatedLogs(path)
	if err != nil {
		return err
	}
	rotated, err = removeUnusedLogs(rotated)
	if err != nil {
		return err
	}
	rotated, err = r.removeExcessLogs(rotated)
	if err != nil {
		return err
	}
	for _, l := range rotated {
		if strings.HasSuffix(l, compressedLogSuffix) {
			continue
		}
		if err := compressLog(l); err != nil {
			return err
		}
	}
	return r.rotateLatest(ctx, id, path)
}

// listRotatedLogs returns the files next to the live log at path whose names start
// with its name and a dot: rotated, compressed and temporary files.
func listRotatedLogs(path string) ([]string, error) {
	dir, base := filepath.Split(path)
	entries, err := os.ReadDir(filepath.Clean(dir))
	if err != nil {
		return nil, fmt.Errorf("list rotated logs of %s: %w", path, err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), base+".") && !e.IsDir() {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, nil
}

// removeUnusedLogs removes temporary files and rotated files whose compressed copy
// exists, and returns the rest.
func removeUnusedLogs(logs []string) ([]string, error) {
	names := make(map[string]bool, len(logs))
	for _, l := range logs {
		names[l] = true
	}
	var inUse []string
	for _, l := range logs {
		if strings.HasSuffix(l, tmpLogSuffix) || names[l+compressedLogSuffix] {
			if err := os.Remove(l); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("remove unused log: %w", err)
			}
			continue
		}
		inUse = append(inUse, l)
	}
	return inUse, nil
}

// removeExcessLogs removes the oldest rotated logs (the timestamps sort by age) so that
// maxFiles-2 remain, and returns those.
func (r *logRotator) removeExcessLogs(logs []string) ([]string, error) {
	sort.Strings(logs)
	keep := r.maxFiles - 2
	excess := len(logs) - keep
	for i := 0; i < excess; i++ {
		if err := os.Remove(logs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("remove old log: %w", err)
		}
	}
	if excess > 0 {
		logs = logs[excess:]
	}
	return logs, nil
}

// compressLog gzips path into path.gz (through a temporary file) and removes path.
func compressLog(path string) (retErr error) {
	in, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open log to compress: %w", err)
	}
	defer in.Close()
	tmp := path + tmpLogSuffix
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create compressed log: %w", err)
	}
	defer func() {
		if retErr != nil {
			out.Close()
			os.Remove(tmp)
		}
	}()
	zw := gzip.NewWriter(out)
	if _, err := io.Copy(zw, in); err != nil {
		return fmt.Errorf("compress %s: %w", path, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compress %s: %w", path, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("close compressed log: %w", err)
	}
	if err := os.Rename(tmp, path+compressedLogSuffix); err != nil {
		return fmt.Errorf("rename compressed log: %w", err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove log after compressing it: %w", err)
	}
	return nil
}

// rotateLatest renames the live log to <path>.<timestamp> and asks the runtime to
// reopen the log. When the runtime cannot, the file is renamed back, so nothing is
// lost and the next round tries again.
func (r *logRotator) rotateLatest(ctx context.Context, id, path string) error {
	rotated := path + "." + r.now().UTC().Format(rotatedTimestampFormat)
	for _, name := range []string{rotated, rotated + compressedLogSuffix} {
		if _, err := os.Lstat(name); err == nil {
			return nil // rotated less than a second ago; next round
		}
	}
	if err := os.Rename(path, rotated); err != nil {
		return fmt.Errorf("rename log for rotation: %w", err)
	}
	if err := r.runtime.ReopenContainerLog(ctx, id); err != nil {
		if rerr := os.Rename(rotated, path); rerr != nil {
			r.logger.Error("rename the rotated log back after a failed reopen; the live log starts empty",
				zap.String("containerID", id), zap.String("rotated", rotated), zap.Error(rerr))
		}
		return fmt.Errorf("reopen container log: %w", err)
	}
	r.logger.Debug("rotated container log", zap.String("containerID", id), zap.String("rotated", rotated))
	return nil
}
