package eviction

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// hasLocalStorageLimit reports whether the pod sets a limit the local
// storage check enforces: an emptyDir sizeLimit or an ephemeral-storage limit
// (pod-level or of a container). Pods without one cost no pod stats.
func hasLocalStorageLimit(pod *v1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil && v.EmptyDir.SizeLimit.Sign() > 0 {
			return true
		}
	}
	if pod.Spec.Resources != nil {
		if _, ok := pod.Spec.Resources.Limits[v1.ResourceEphemeralStorage]; ok {
			return true
		}
	}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if _, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]; ok {
				return true
			}
		}
	}
	return false
}

// localStorageEviction evicts every pod over one of its local storage
// limits, checked in upstream's order: an emptyDir over its sizeLimit, the
// pod over its total ephemeral-storage limit, a container over its own.
func (m *Manager) localStorageEviction(ctx context.Context, deps Deps, pods []*v1.Pod, stats podStatsFunc) []*v1.Pod {
	var evicted []*v1.Pod
	for _, pod := range pods {
		ps, ok := stats(pod)
		if !ok {
			continue
		}
		msg, signal := m.localStorageViolation(pod, ps)
		if msg == "" {
			continue
		}
		if m.evictPod(ctx, deps, pod, immediateGracePeriod, msg, nil, nil) {
			m.metrics.evictions.WithLabelValues(signal).Inc()
			evicted = append(evicted, pod)
		}
	}
	return evicted
}

// localStorageViolation returns upstream's message and signal label for the
// first limit the pod exceeds, or "".
func (m *Manager) localStorageViolation(pod *v1.Pod, ps statsapi.PodStats) (string, string) {
	used := map[string]int64{}
	for _, vs := range ps.VolumeStats {
		if vs.UsedBytes != nil {
			used[vs.Name] = int64(*vs.UsedBytes)
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Sign() <= 0 {
			continue
		}
		if u, ok := used[v.Name]; ok && u > v.EmptyDir.SizeLimit.Value() {
			return fmt.Sprintf(emptyDirMsgFmt, v.Name, v.EmptyDir.SizeLimit.String()), signalEmptyDirFsLimit
		}
	}
	if limit, ok := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})[v1.ResourceEphemeralStorage]; ok {
		var total int64
		if ps.EphemeralStorage != nil && ps.EphemeralStorage.UsedBytes != nil {
			total = int64(*ps.EphemeralStorage.UsedBytes)
		}
		if total > limit.Value() {
			return fmt.Sprintf(podEphemeralMsgFmt, limit.String()), signalEphemeralPodFsLimit
		}
	}
	limits := map[string]int64{}
	limitText := map[string]string{}
	addLimit := func(c v1.Container) {
		if q, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]; ok && q.Value() != 0 {
			limits[c.Name], limitText[c.Name] = q.Value(), q.String()
		}
	}
	for _, c := range pod.Spec.Containers {
		addLimit(c)
	}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			addLimit(c)
		}
	}
	for _, cs := range ps.Containers {
		limit, ok := limits[cs.Name]
		if !ok {
			continue
		}
		var u int64
		if cs.Logs != nil && cs.Logs.UsedBytes != nil {
			u += int64(*cs.Logs.UsedBytes)
		}
		if !*m.dedicatedImageFs && cs.Rootfs != nil && cs.Rootfs.UsedBytes != nil {
			u += int64(*cs.Rootfs.UsedBytes)
		}
		if u > limit {
			return fmt.Sprintf(containerEphemeralMsgFmt, cs.Name, limitText[cs.Name]), signalEphemeralContainerFsLimit
		}
	}
	return "", ""
}
