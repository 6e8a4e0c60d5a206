package kubelet

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/types"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes"
	"github.com/kubelet-dockershim/kubelet/internal/kuberuntime"
)

// ErrNeedsAPIServer is returned (wrapped) for environment sources a standalone
// kubelet cannot resolve: configMap and secret references that are not optional.
var ErrNeedsAPIServer = errors.New("needs an API server")

// envResolver resolves a container's environment (upstream
// makeEnvironmentVariables without the service links, which need an API server).
type envResolver struct {
	nodeIP net.IP
	// capacity gives the node capacity used as the default limit of containers
	// that set none (downward API resourceFieldRef).
	capacity func() v1.ResourceList
}

// resolve returns the container's environment in declaration order: envFrom
// first, then env, where a later definition of a name replaces the earlier value.
// Values expand $(VAR) references to variables defined before them.
func (r *envResolver) resolve(pod *v1.Pod, c *v1.Container, podIP string, podIPs []string) ([]kuberuntime.EnvVar, error) {
	env := newOrderedEnv()
	for _, from := range c.EnvFrom {
		if err := skipUnresolvableEnvFrom(pod, from); err != nil {
			return nil, err
		}
	}
	for _, e := range c.Env {
		value, skip, err := r.value(pod, c, e, env.lookup, podIP, podIPs)
		if err != nil {
			return nil, fmt.Errorf("env %q of container %q: %w", e.Name, c.Name, err)
		}
		if !skip {
			env.set(e.Name, value)
		}
	}
	return env.list(), nil
}

// value resolves one variable; skip is true for an optional reference that
// cannot be resolved.
func (r *envResolver) value(pod *v1.Pod, c *v1.Container, e v1.EnvVar, lookup func(string) (string, bool), podIP string, podIPs []string) (string, bool, error) {
	if e.Value != "" || e.ValueFrom == nil {
		return types.Expand(e.Value, lookup), false, nil
	}
	from := e.ValueFrom
	switch {
	case from.FieldRef != nil:
		v, err := r.fieldRef(pod, from.FieldRef, podIP, podIPs)
		return v, false, err
	case from.ResourceFieldRef != nil:
		v, err := r.resourceFieldRef(pod, c, from.ResourceFieldRef)
		return v, false, err
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		if ref.Optional != nil && *ref.Optional {
			return "", true, nil
		}
		return "", false, fmt.Errorf("couldn't get configMap %s/%s: %w", pod.Namespace, ref.Name, ErrNeedsAPIServer)
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		if ref.Optional != nil && *ref.Optional {
			return "", true, nil
		}
		return "", false, fmt.Errorf("couldn't get secret %s/%s: %w", pod.Namespace, ref.Name, ErrNeedsAPIServer)
	case from.FileKeyRef != nil:
		return "", false, errors.New("fileKeyRef is not supported")
	}
	return "", false, errors.New("valueFrom has no source")
}

// skipUnresolvableEnvFrom accepts an optional configMap or secret envFrom (it
// contributes nothing) and rejects a required one.
func skipUnresolvableEnvFrom(pod *v1.Pod, from v1.EnvFromSource) error {
	switch {
	case from.ConfigMapRef != nil:
		if from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
			return nil
		}
		return fmt.Errorf("couldn't get configMap %s/%s: %w", pod.Namespace, from.ConfigMapRef.Name, ErrNeedsAPIServer)
	case from.SecretRef != nil:
		if from.SecretRef.Optional != nil && *from.SecretRef.Optional {
			return nil
		}
		return fmt.Errorf("couldn't get secret %s/%s: %w", pod.Namespace, from.SecretRef.Name, ErrNeedsAPIServer)
	}
	return nil
}

// fieldRef resolves a downward API field of the pod.
func (r *envResolver) fieldRef(pod *v1.Pod, fs *v1.ObjectFieldSelector, podIP string, podIPs []string) (string, error) {
	if fs.APIVersion != "" && fs.APIVersion != "v1" {
		return "", fmt.Errorf("unsupported fieldRef apiVersion %q", fs.APIVersion)
	}
	podIPs = sortPodIPs(r.nodeIP, podIPs)
	if len(podIPs) > 0 {
		podIP = podIPs[0]
	}
	switch path := fs.FieldPath; path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return volumes.FormatMap(pod.Labels), nil
	case "metadata.annotations":
		return volumes.FormatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		if r.nodeIP == nil {
			return "", errors.New("the node IP is unknown")
		}
		return r.nodeIP.String(), nil
	case "status.podIP":
		return podIP, nil
	case "status.podIPs":
		return strings.Join(podIPs, ","), nil
	default:
		if key, ok := subscript(path, "metadata.labels"); ok {
			return pod.Labels[key], nil
		}
		if key, ok := subscript(path, "metadata.annotations"); ok {
			return pod.Annotations[key], nil
		}
		return "", fmt.Errorf("unsupported fieldPath %q", path)
	}
}

// subscript parses prefix['key'].
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// resourceFieldRef resolves requests/limits of this or another container of the
// pod; unset limits default to the node capacity.
func (r *envResolver) resourceFieldRef(pod *v1.Pod, c *v1.Container, fs *v1.ResourceFieldSelector) (string, error) {
	target := c
	if fs.ContainerName != "" {
		target = findContainer(pod, fs.ContainerName)
		if target == nil {
			return "", fmt.Errorf("container %q referenced by resourceFieldRef not found", fs.ContainerName)
		}
	}
	divisor := fs.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	kind, name, ok := strings.Cut(fs.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("unsupported container resource %q", fs.Resource)
	}
	res := v1.ResourceName(name)
	if res != v1.ResourceCPU && res != v1.ResourceMemory && res != v1.ResourceEphemeralStorage &&
		!strings.HasPrefix(name, v1.ResourceHugePagesPrefix) {
		return "", fmt.Errorf("unsupported container resource %q", fs.Resource)
	}
	q := r.quantity(target, kind, res)
	if res == v1.ResourceCPU {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

// quantity returns the container's request or limit; a missing cpu, memory or
// ephemeral-storage limit is the node capacity (as upstream's
// defaultPodLimitsForDownwardAPI), a missing request is zero.
func (r *envResolver) quantity(c *v1.Container, kind string, res v1.ResourceName) resource.Quantity {
	list := c.Resources.Requests
	if kind == "limits" {
		list = c.Resources.Limits
	}
	if q, ok := list[res]; ok {
		return q
	}
	if kind == "limits" && r.capacity != nil {
		if q, ok := r.capacity()[res]; ok {
			return q
		}
	}
	return resource.Quantity{}
}

func findContainer(pod *v1.Pod, name string) *v1.Container {
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// orderedEnv keeps variables in first-definition order; redefinition replaces.
type orderedEnv struct {
	index map[string]int
	vars  []kuberuntime.EnvVar
}

func newOrderedEnv() *orderedEnv { return &orderedEnv{index: map[string]int{}} }

func (e *orderedEnv) set(name, value string) {
	if i, ok := e.index[name]; ok {
		e.vars[i].Value = value
		return
	}
	e.index[name] = len(e.vars)
	e.vars = append(e.vars, kuberuntime.EnvVar{Name: name, Value: value})
}

func (e *orderedEnv) lookup(name string) (string, bool) {
	i, ok := e.index[name]
	if !ok {
		return "", false
	}
	return e.vars[i].Value, true
}

func (e *orderedEnv) list() []kuberuntime.EnvVar { return e.vars }
