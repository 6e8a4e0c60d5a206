package resources

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ResolveFieldRef resolves a downward API resourceFieldRef, for an env
// variable (c is the container being started) or a volume file (c is nil and
// the selector names its container), to the decimal string upstream writes:
//
//   - the container is fs.ContainerName (a container or init container of the
//     pod), else c;
//   - requests.<r> is the container's request (0 when unset);
//   - limits.cpu, limits.memory and limits.ephemeral-storage are the
//     container's limit when set and non-zero, else the pod-level limit
//     (pod spec.resources; cpu and memory only, as upstream's
//     PodLevelResources, on by default in 1.37), else the node's allocatable;
//     limits.hugepages-<size> is never defaulted;
//   - the value is divided by the divisor (1 when unset) and rounded up, CPU
//     in millicores ("250m" with divisor "1m" is 250).
//
// Upstream applies the pod-level step to env variables only; here env and
// volume files agree.
func ResolveFieldRef(fs *v1.ResourceFieldSelector, pod *v1.Pod, c *v1.Container, allocatable v1.ResourceList) (string, error) {
	target, err := fieldRefContainer(fs, pod, c)
	if err != nil {
		return "", err
	}
	kind, res, err := parseFieldRefResource(fs.Resource)
	if err != nil {
		return "", err
	}
	var q resource.Quantity
	if kind == "requests" {
		q = target.Resources.Requests[res]
	} else {
		q = limitOf(pod, target, res, allocatable)
	}
	return divideCeil(res, q, fs.Divisor), nil
}

// fieldRefContainer finds the container a selector refers to.
func fieldRefContainer(fs *v1.ResourceFieldSelector, pod *v1.Pod, c *v1.Container) (*v1.Container, error) {
	if fs.ContainerName == "" {
		if c == nil {
			return nil, fmt.Errorf("resourceFieldRef %s needs a containerName", fs.Resource)
		}
		return c, nil
	}
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == fs.ContainerName {
				return &list[i], nil
			}
		}
	}
	return nil, fmt.Errorf("container %s not found", fs.ContainerName)
}

// parseFieldRefResource splits "limits.cpu" into its kind and resource and
// refuses what the downward API does not expose.
func parseFieldRefResource(s string) (string, v1.ResourceName, error) {
	kind, name, ok := strings.Cut(s, ".")
	res := v1.ResourceName(name)
	if ok && (kind == "limits" || kind == "requests") {
		switch {
		case res == v1.ResourceCPU, res == v1.ResourceMemory, res == v1.ResourceEphemeralStorage, IsHugePages(res):
			return kind, res, nil
		}
	}
	return "", "", fmt.Errorf("unsupported container resource : %v", s)
}

// limitOf is the container's limit of res with upstream's defaults.
func limitOf(pod *v1.Pod, c *v1.Container, res v1.ResourceName, allocatable v1.ResourceList) resource.Quantity {
	if q, ok := c.Resources.Limits[res]; (ok && !q.IsZero()) || IsHugePages(res) {
		return q
	}
	if (res == v1.ResourceCPU || res == v1.ResourceMemory) && pod.Spec.Resources != nil {
		if q, ok := pod.Spec.Resources.Limits[res]; ok && !q.IsZero() {
			return q
		}
	}
	return allocatable[res]
}

// divideCeil divides q by divisor (1 when zero) rounding up; CPU is compared in
// millicores.
func divideCeil(res v1.ResourceName, q, divisor resource.Quantity) string {
	if divisor.IsZero() {
		divisor = *resource.NewQuantity(1, resource.DecimalSI)
	}
	var v float64
	if res == v1.ResourceCPU {
		v = math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue()))
	} else {
		v = math.Ceil(float64(q.Value()) / float64(divisor.Value()))
	}
	return strconv.FormatInt(int64(v), 10)
}
