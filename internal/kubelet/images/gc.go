package images

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Node event type and reasons, as upstream's pkg/kubelet/events.
const (
	eventTypeWarning          = v1.EventTypeWarning
	eventImageGCFailed        = "ImageGCFailed"
	eventInvalidDiskCapacity  = "InvalidDiskCapacity"
	eventFreeDiskSpaceFailed  = "FreeDiskSpaceFailed"
	errInvalidCapacityMessage = "invalid capacity 0 on image filesystem"
)

// GarbageCollect applies the policy once. beganGC is when periodic collection
// started; MaxAge applies only once it lies more than MaxAge in the past. The
// error reports a failed step, an image that could not be removed, or usage
// above the high threshold that removing images could not bring down.
func (m *Manager) GarbageCollect(ctx context.Context, beganGC time.Time) error {
	ctx, span := m.tracer.Start(ctx, "Images/GarbageCollect")
	defer span.End()
	if err := m.acquire(ctx); err != nil {
		return err
	}
	defer m.release()

	freeTime := m.clock.Now()
	candidates, err := m.evictionOrder(ctx, freeTime)
	if err != nil {
		return err
	}
	if candidates, err = m.freeOldImages(ctx, candidates, freeTime, beganGC); err != nil {
		return err
	}
	capacity, available, err := m.imageFsUsage(ctx)
	if err != nil {
		return err
	}
	if capacity == 0 {
		m.event(eventTypeWarning, eventInvalidDiskCapacity, errInvalidCapacityMessage)
		return errors.New(errInvalidCapacityMessage)
	}
	usagePercent := 100 - int(available*100/capacity)
	if usagePercent < m.policy.HighThresholdPercent {
		return nil
	}
	amountToFree := capacity*int64(100-m.policy.LowThresholdPercent)/100 - available
	m.logger.Info("Disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold",
		zap.Int("usage", usagePercent), zap.Int("highThreshold", m.policy.HighThresholdPercent),
		zap.Int64("amountToFree", amountToFree), zap.Int("lowThreshold", m.policy.LowThresholdPercent))
	freed, err := m.freeSpace(ctx, amountToFree, freeTime, candidates)
	if err != nil {
		return err
	}
	m.runPostGCHooks(ctx, freeTime)
	if freed < amountToFree {
		msg := fmt.Sprintf("Insufficient free disk space on the node's image filesystem (%d%% of %s used). "+
			"Failed to free sufficient space by deleting unused images (freed %d bytes). "+
			"Investigate disk usage, as it could be used by active images, logs, volumes, or other data.",
			usagePercent, formatSize(capacity), freed)
		m.event(eventTypeWarning, eventFreeDiskSpaceFailed, msg)
		return errors.New(msg)
	}
	return nil
}

// DeleteUnusedImages removes every candidate at least MinAge old (the
// eviction manager's disk reclaim), counted with reason "space".
func (m *Manager) DeleteUnusedImages(ctx context.Context) error {
	if err := m.acquire(ctx); err != nil {
		return err
	}
	defer m.release()

	m.logger.Info("Attempting to delete unused images")
	freeTime := m.clock.Now()
	candidates, err := m.evictionOrder(ctx, freeTime)
	if err != nil {
		return err
	}
	if _, err = m.freeSpace(ctx, math.MaxInt64, freeTime, candidates); err != nil {
		return err
	}
	m.runPostGCHooks(ctx, freeTime)
	return nil
}

// imageFsUsage returns the image filesystem's capacity and available bytes,
// available clamped to capacity.
func (m *Manager) imageFsUsage(ctx context.Context) (capacity, available int64, err error) {
	st, err := m.fs.ImageFsStats(ctx)
	if err != nil {
		return 0, 0, err
	}
	if st == nil {
		return 0, 0, errors.New("images: no image filesystem stats")
	}
	if st.CapacityBytes != nil {
		capacity = int64(*st.CapacityBytes)
	}
	if st.AvailableBytes != nil {
		available = int64(*st.AvailableBytes)
	}
	if available > capacity {
		m.logger.Info("Availability is larger than capacity", zap.Int64("available", available), zap.Int64("capacity", capacity))
		available = capacity
	}
	return capacity, available, nil
}

// freeOldImages removes the candidates unused for longer than MaxAge, once
// the kubelet has collected for longer than MaxAge (so that images are not
// judged before they had a chance to be used). It returns the candidates left.
func (m *Manager) freeOldImages(ctx context.Context, candidates []candidate, freeTime, beganGC time.Time) ([]candidate, error) {
	if m.policy.MaxAge == 0 || freeTime.Sub(beganGC) <= m.policy.MaxAge {
		return candidates, nil
	}
	var errs []error
	left := make([]candidate, 0, len(candidates))
	for _, c := range candidates {
		unused := freeTime.Sub(c.lastUsed)
		if unused <= m.policy.MaxAge {
			left = append(left, c)
			continue
		}
		if err := m.freeImage(ctx, c, reasonAge, zap.Duration("unusedFor", unused), zap.Duration("maxAge", m.policy.MaxAge)); err != nil {
			errs = append(errs, err)
			left = append(left, c)
		}
	}
	if len(errs) > 0 {
		return left, fmt.Errorf("wanted to free images older than %v, encountered errors in image deletion: %w",
			m.policy.MaxAge, utilerrors.NewAggregate(errs))
	}
	return left, nil
}

// runPostGCHooks gives the hooks the images left (every image known, in use
// or not, less those removed).
func (m *Manager) runPostGCHooks(ctx context.Context, gcStart time.Time) {
	if len(m.hooks) == 0 {
		return
	}
	m.recordsMu.Lock()
	remaining := make([]string, 0, len(m.records))
	for id := range m.records {
		remaining = append(remaining, id)
	}
	m.recordsMu.Unlock()
	for _, h := range m.hooks {
		h(ctx, remaining, gcStart)
	}
}

// freeSpace removes candidates in order until bytesToFree bytes are freed,
// skipping images used at or after freeTime and images first detected less
// than MinAge ago. It returns the bytes freed, also on error.
func (m *Manager) freeSpace(ctx context.Context, bytesToFree int64, freeTime time.Time, candidates []candidate) (int64, error) {
	var errs []error
	var freed int64
	for _, c := range candidates {
		if !c.lastUsed.Before(freeTime) {
			m.logger.Debug("Image was used too recently to be removed", zap.String("imageID", c.id), zap.Time("lastUsed", c.lastUsed))
			continue
		}
		if age := freeTime.Sub(c.firstDetected); age < m.policy.MinAge {
			m.logger.Debug("Image is younger than the minimum GC age", zap.String("imageID", c.id),
				zap.Duration("age", age), zap.Duration("minAge", m.policy.MinAge))
			continue
		}
		if err := m.freeImage(ctx, c, reasonSpace, zap.Int64("bytesToFree", bytesToFree), zap.Int64("freedSoFar", freed)); err != nil {
			errs = append(errs, err)
			continue
		}
		freed += c.size
		if freed >= bytesToFree {
			break
		}
	}
	if len(errs) > 0 {
		return freed, fmt.Errorf("wanted to free %d bytes, but freed %d bytes space with errors in image deletion: %w",
			bytesToFree, freed, utilerrors.NewAggregate(errs))
	}
	return freed, nil
}

// freeImage removes one image, forgets its record and counts it under reason.
func (m *Manager) freeImage(ctx context.Context, c candidate, reason string, why ...zap.Field) error {
	fields := append([]zap.Field{
		zap.String("imageID", c.id), zap.Int64("size", c.size), zap.String("reason", reason),
		zap.Time("lastUsed", c.lastUsed), zap.Time("firstDetected", c.firstDetected),
	}, why...)
	m.logger.Info("Removing image to free bytes", fields...)
	if err := m.images.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: c.id, RuntimeHandler: c.runtimeHandler}); err != nil {
		return err
	}
	m.forget(c.id)
	m.collected.WithLabelValues(reason).Inc()
	return nil
}

// formatSize renders a byte count in binary units with one decimal, as in
// upstream's FreeDiskSpaceFailed message ("512 B", "1.5 GiB").
func formatSize(bytes int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	if bytes < 1024 {
		return fmt.Sprintf("%d B", bytes)
	}
	v := float64(bytes) / 1024
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}
