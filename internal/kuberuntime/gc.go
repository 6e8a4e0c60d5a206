package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"
	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// gcContainer is a dead container considered for removal.
type gcContainer struct {
	id        string
	name      string
	createdAt time.Time
	unknown   bool // may still run: stop it before removing
	attempt   uint32
}

// gcSandbox is a sandbox considered for removal.
type gcSandbox struct {
	id        string
	createdAt time.Time
	active    bool // ready, or still has containers
	attempt   uint32
}

// evictUnit groups the instances of one container of one pod.
type evictUnit struct {
	uid  k8stypes.UID
	name string
}

// GarbageCollect removes what the runtime no longer needs:
//
//   - dead containers older than policy.MinAge beyond policy.MaxPerPodContainer
//     per (pod, container name), oldest first, then beyond policy.MaxContainers;
//     every dead container of a pod whose content should be removed (only when
//     allSourcesReady, so pods are not mistaken for deleted at startup), and of
//     pods whose runtime should be removed when evictNonDeletedPods;
//   - sandboxes that are not ready and have no containers, keeping the newest
//     of each pod that still exists;
//   - the log directories of pods whose content should be removed (only when
//     allSourcesReady).
//
// Removal failures are logged; listing failures are returned.
func (m *Manager) GarbageCollect(ctx context.Context, policy kubecontainer.GCPolicy, allSourcesReady bool, evictNonDeletedPods bool, podStateProvider kubecontainer.PodStateProvider) error {
	ctx, span := m.tracer.Start(ctx, "Containers/GarbageCollect")
	defer span.End()
	if podStateProvider == nil {
		return errors.New("garbage collect: no pod state provider")
	}
	removable := func(uid k8stypes.UID) bool {
		return podStateProvider.ShouldPodContentBeRemoved(uid) ||
			(evictNonDeletedPods && podStateProvider.ShouldPodRuntimeBeRemoved(uid))
	}
	var errs []error
	if err := m.evictContainers(ctx, policy, allSourcesReady, removable); err != nil {
		errs = append(errs, err)
	}
	if err := m.evictSandboxes(ctx, removable); err != nil {
		errs = append(errs, err)
	}
	if allSourcesReady {
		if err := m.evictPodLogsDirectories(podStateProvider); err != nil {
			errs = append(errs, err)
		}
		if m.actuated != nil {
			// The actuated resources of pods whose content goes (upstream
			// removes them here too).
			if err := m.actuated.RemoveOrphans(func(uid k8stypes.UID) bool { return !podStateProvider.ShouldPodContentBeRemoved(uid) }); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// evictContainers removes dead containers per the policy.
func (m *Manager) evictContainers(ctx context.Context, policy kubecontainer.GCPolicy, allSourcesReady bool, removable func(k8stypes.UID) bool) error {
	units, err := m.evictableContainers(ctx, policy.MinAge)
	if err != nil {
		return err
	}
	if allSourcesReady {
		for key, unit := range units {
			if removable(key.uid) {
				m.removeOldestN(ctx, unit, len(unit))
				delete(units, key)
			}
		}
	}
	if policy.MaxPerPodContainer >= 0 {
		m.enforceMaxPerUnit(ctx, units, policy.MaxPerPodContainer)
	}
	if policy.MaxContainers < 0 || countContainers(units) <= policy.MaxContainers {
		return nil
	}
	// Leave an equal share per unit (at least one), then remove the oldest.
	perUnit := policy.MaxContainers / len(units)
	if perUnit < 1 {
		perUnit = 1
	}
	m.enforceMaxPerUnit(ctx, units, perUnit)
	if n := countContainers(units); n > policy.MaxContainers {
		var all []gcContainer
		for _, unit := range units {
			all = append(all, unit...)
		}
		m.removeOldestN(ctx, all, n-policy.MaxContainers)
	}
	return nil
}

// evictableContainers lists the dead kubelet containers created more than
// minAge ago, grouped by pod and container name.
func (m *Manager) evictableContainers(ctx context.Context, minAge time.Duration) (map[evictUnit][]gcContainer, error) {
	containers, err := m.runtime.ListContainers(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list containers for GC: %w", err)
	}
	newest := time.Now().Add(-minAge)
	units := make(map[evictUnit][]gcContainer)
	for _, c := range containers {
		if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		created := time.Unix(0, c.GetCreatedAt())
		if newest.Before(created) {
			continue
		}
		uid := getLabeledInfo(c.GetLabels()).PodUID
		if uid == "" {
			continue // not a kubelet container
		}
		key := evictUnit{uid: uid, name: c.GetMetadata().GetName()}
		units[key] = append(units[key], gcContainer{
			id: c.GetId(), name: key.name, createdAt: created, attempt: c.GetMetadata().GetAttempt(),
			unknown: c.GetState() == runtimeapi.ContainerState_CONTAINER_UNKNOWN,
		})
	}
	return units, nil
}

func (m *Manager) enforceMaxPerUnit(ctx context.Context, units map[evictUnit][]gcContainer, max int) {
	for key, unit := range units {
		if n := len(unit) - max; n > 0 {
			units[key] = m.removeOldestN(ctx, unit, n)
		}
	}
}

// removeOldestN removes the n oldest containers (by attempt, then creation)
// and returns the others.
func (m *Manager) removeOldestN(ctx context.Context, containers []gcContainer, n int) []gcContainer {
	sort.SliceStable(containers, func(i, j int) bool {
		if containers[i].attempt != containers[j].attempt {
			return containers[i].attempt > containers[j].attempt
		}
		return containers[i].createdAt.After(containers[j].createdAt)
	})
	keep := len(containers) - n
	if keep < 0 {
		keep = 0
	}
	for i := len(containers) - 1; i >= keep; i-- {
		c := containers[i]
		if c.unknown {
			req := killRequest{id: m.containerID(c.id), name: c.name, message: "Container is in unknown state, try killing it before removal"}
			if err := m.killContainer(ctx, req); err != nil {
				m.logger.Warn("stop container before removal failed", zap.String("containerID", c.id), zap.Error(err))
				continue
			}
		}
		if err := m.removeContainer(ctx, c.id); err != nil {
			m.logger.Warn("remove container failed", zap.String("containerID", c.id), zap.Error(err))
		}
	}
	return containers[:keep]
}

// removeContainer removes a container's log files, then the container. A
// container that is already gone counts as removed.
func (m *Manager) removeContainer(ctx context.Context, id string) error {
	if err := m.removeContainerLogFiles(ctx, id); err != nil {
		return err
	}
	if err := m.runtime.RemoveContainer(ctx, id); err != nil && !crierrors.IsNotFound(err) {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	return nil
}

// removeContainerLogFiles removes the container's log and its rotated copies.
func (m *Manager) removeContainerLogFiles(ctx context.Context, id string) error {
	resp, err := m.runtime.ContainerStatus(ctx, id, false)
	if crierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("container status %s: %w", id, err)
	}
	logPath := resp.GetStatus().GetLogPath()
	if logPath == "" {
		return nil
	}
	files, err := filepath.Glob(globEscape(logPath) + "*")
	if err != nil {
		return fmt.Errorf("find logs of container %s: %w", id, err)
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove log %s of container %s: %w", f, id, err)
		}
	}
	return nil
}

// globEscape escapes the glob metacharacters of a literal path.
func globEscape(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)
	return r.Replace(p)
}

// evictSandboxes removes sandboxes that are not ready and have no containers,
// keeping the newest of each pod that is not removable.
func (m *Manager) evictSandboxes(ctx context.Context, removable func(k8stypes.UID) bool) error {
	containers, err := m.runtime.ListContainers(ctx, nil)
	if err != nil {
		return fmt.Errorf("list containers for sandbox GC: %w", err)
	}
	sandboxes, err := m.runtime.ListPodSandbox(ctx, nil)
	if err != nil {
		return fmt.Errorf("list pod sandboxes for GC: %w", err)
	}
	withContainers := make(map[string]bool, len(containers))
	for _, c := range containers {
		withContainers[c.GetPodSandboxId()] = true
	}
	byPod := make(map[k8stypes.UID][]gcSandbox)
	for _, sb := range sandboxes {
		uid := k8stypes.UID(sb.GetMetadata().GetUid())
		if uid == "" {
			uid = getLabeledInfo(sb.GetLabels()).PodUID
		}
		if uid == "" {
			continue
		}
		byPod[uid] = append(byPod[uid], gcSandbox{
			id: sb.GetId(), createdAt: time.Unix(0, sb.GetCreatedAt()), attempt: sb.GetMetadata().GetAttempt(),
			active: sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY || withContainers[sb.GetId()],
		})
	}
	for uid, sbs := range byPod {
		n := len(sbs) - 1 // keep the newest of a pod that exists
		if removable(uid) {
			n = len(sbs)
		}
		m.removeOldestSandboxes(ctx, sbs, n)
	}
	return nil
}

// removeOldestSandboxes removes the inactive ones among the n oldest sandboxes.
func (m *Manager) removeOldestSandboxes(ctx context.Context, sbs []gcSandbox, n int) {
	sort.SliceStable(sbs, func(i, j int) bool {
		if sbs[i].attempt != sbs[j].attempt {
			return sbs[i].attempt > sbs[j].attempt
		}
		return sbs[i].createdAt.After(sbs[j].createdAt)
	})
	for i := len(sbs) - 1; i >= len(sbs)-n && i >= 0; i-- {
		if sbs[i].active {
			continue
		}
		m.removeSandbox(ctx, sbs[i].id)
	}
}

// removeSandbox stops (in case nobody did) and removes a sandbox.
func (m *Manager) removeSandbox(ctx context.Context, id string) {
	if err := m.runtime.StopPodSandbox(ctx, id); err != nil && !crierrors.IsNotFound(err) {
		m.logger.Warn("stop sandbox before removal failed", zap.String("sandbox", id), zap.Error(err))
		return
	}
	if err := m.runtime.RemovePodSandbox(ctx, id); err != nil && !crierrors.IsNotFound(err) {
		m.logger.Warn("remove sandbox failed", zap.String("sandbox", id), zap.Error(err))
	}
}

// evictPodLogsDirectories removes <podLogsDir>/<ns>_<name>_<uid> of pods
// whose content should be removed.
func (m *Manager) evictPodLogsDirectories(psp kubecontainer.PodStateProvider) error {
	entries, err := os.ReadDir(m.podLogsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read pod logs directory %s: %w", m.podLogsDir, err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		uid := podUIDFromLogsDirectory(e.Name())
		if uid == "" || !psp.ShouldPodContentBeRemoved(uid) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(m.podLogsDir, e.Name())); err != nil {
			m.logger.Warn("remove pod logs directory failed", zap.String("dir", e.Name()), zap.Error(err))
		}
	}
	return nil
}

// podUIDFromLogsDirectory parses the UID out of <ns>_<name>_<uid> (names and
// namespaces cannot contain "_").
func podUIDFromLogsDirectory(name string) k8stypes.UID {
	parts := strings.Split(name, "_")
	if len(parts) != 3 {
		return ""
	}
	return k8stypes.UID(parts[2])
}

func countContainers(units map[evictUnit][]gcContainer) int {
	n := 0
	for _, unit := range units {
		n += len(unit)
	}
	return n
}
