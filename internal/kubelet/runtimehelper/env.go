package runtimehelper

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/record"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes"
)

// ErrNeedsAPIServer is returned (wrapped) for environment sources a standalone
// kubelet cannot resolve: configMap and secret references that are not optional.
var ErrNeedsAPIServer = errors.New("needs an API server")

// reasonInvalidEnvVarNames is the warning event for envFrom keys that are not
// valid variable names (upstream InvalidEnvironmentVariableNames).
const reasonInvalidEnvVarNames = "InvalidEnvironmentVariableNames"

// envResolver resolves a container's environment (upstream
// makeEnvironmentVariables).
type envResolver struct {
	nodeIP net.IP
	// node gives the node's allocatable, the default limit of containers that
	// set none (downward API resourceFieldRef); nil: none.
	node NodeAllocatable
	// objects reads configMaps and secrets; nil = standalone: required
	// references fail with ErrNeedsAPIServer, optional ones are skipped.
	objects EnvObjects
	// services lists the services of the service links; nil = no service
	// variables (standalone).
	services ServiceLister
	// recorder receives InvalidEnvironmentVariableNames warnings; nil = they
	// are only logged.
	recorder record.EventRecorder
	// logger; nil = nothing is logged.
	logger *zap.Logger
}

// environment returns the container's environment in upstream's precedence:
// the service links first, then envFrom, then env, where a later definition of
// a name replaces the earlier value in place. Values expand $(VAR) references
// to variables defined before them (service variables included). Errors about
// configMaps and secrets carry upstream's messages (`configmap "x" not found`,
// `couldn't find key k in ConfigMap ns/x`).
func (r *envResolver) environment(ctx context.Context, pod *v1.Pod, c *v1.Container, podIP string, podIPs []string) ([]kubecontainer.EnvVar, error) {
	env := newOrderedEnv()
	if err := r.addServiceEnv(pod, env); err != nil {
		return nil, err
	}
	refs := &envRefs{ctx: ctx, objects: r.objects, namespace: pod.Namespace}
	for _, from := range c.EnvFrom {
		if err := r.addEnvFrom(pod, from, refs, env); err != nil {
			return nil, err
		}
	}
	for _, e := range c.Env {
		value, skip, err := r.value(pod, c, e, refs, env.lookup, podIP, podIPs)
		if err != nil {
			return nil, err
		}
		if !skip {
			env.set(e.Name, value)
		}
	}
	return env.list(), nil
}

// value resolves one variable; skip is true for an optional reference that
// cannot be resolved.
func (r *envResolver) value(pod *v1.Pod, c *v1.Container, e v1.EnvVar, refs *envRefs, lookup func(string) (string, bool), podIP string, podIPs []string) (string, bool, error) {
	if e.Value != "" || e.ValueFrom == nil {
		return kubecontainer.Expand(e.Value, lookup), false, nil
	}
	wrap := func(v string, err error) (string, bool, error) {
		if err != nil {
			return "", false, fmt.Errorf("env %q of container %q: %w", e.Name, c.Name, err)
		}
		return v, false, nil
	}
	from := e.ValueFrom
	switch {
	case from.FieldRef != nil:
		return wrap(r.fieldRef(pod, from.FieldRef, podIP, podIPs))
	case from.ResourceFieldRef != nil:
		return wrap(r.resourceFieldRef(pod, c, from.ResourceFieldRef))
	case from.ConfigMapKeyRef != nil:
		return refs.configMapKey(from.ConfigMapKeyRef)
	case from.SecretKeyRef != nil:
		return refs.secretKey(from.SecretKeyRef)
	case from.FileKeyRef != nil:
		return wrap("", errors.New("fileKeyRef is not supported"))
	}
	return wrap("", errors.New("valueFrom has no source"))
}

// addEnvFrom adds every key of an envFrom configMap or secret, prefixed. Keys
// that are not valid variable names are skipped and reported as a warning
// event. A missing optional source adds nothing.
func (r *envResolver) addEnvFrom(pod *v1.Pod, from v1.EnvFromSource, refs *envRefs, env *orderedEnv) error {
	var (
		kind, name string
		data       map[string]string
	)
	switch {
	case from.ConfigMapRef != nil:
		kind, name = "configMap", from.ConfigMapRef.Name
		cm, err := refs.configMap(name)
		if err != nil {
			return skipOptional(from.ConfigMapRef.Optional, err)
		}
		data = cm.Data
	case from.SecretRef != nil:
		kind, name = "secret", from.SecretRef.Name
		s, err := refs.secret(name)
		if err != nil {
			return skipOptional(from.SecretRef.Optional, err)
		}
		data = make(map[string]string, len(s.Data))
		for k, v := range s.Data {
			data[k] = string(v)
		}
	default:
		return nil
	}
	var invalid []string
	for _, key := range slices.Sorted(maps.Keys(data)) {
		v := from.Prefix + key
		if len(validation.IsRelaxedEnvVarName(v)) > 0 {
			invalid = append(invalid, v)
			continue
		}
		env.set(v, data[key])
	}
	if len(invalid) > 0 {
		r.warnInvalidNames(pod, kind, name, invalid)
	}
	return nil
}

// warnInvalidNames reports skipped envFrom keys as upstream's warning event.
func (r *envResolver) warnInvalidNames(pod *v1.Pod, kind, name string, keys []string) {
	const format = "Keys [%s] from the EnvFrom %s %s/%s were skipped since they are considered invalid environment variable names."
	if r.recorder != nil {
		r.recorder.Eventf(pod, v1.EventTypeWarning, reasonInvalidEnvVarNames, format, strings.Join(keys, ", "), kind, pod.Namespace, name)
	}
	if r.logger != nil {
		r.logger.Warn("skipped invalid environment variable names",
			zap.String("pod", pod.Namespace+"/"+pod.Name), zap.String(kind, name), zap.Strings("keys", keys))
	}
}

// skipOptional returns nil for an optional source that is missing (or that a
// standalone kubelet cannot read), else err.
func skipOptional(optional *bool, err error) error {
	if optional != nil && *optional && (apierrors.IsNotFound(err) || errors.Is(err, ErrNeedsAPIServer)) {
		return nil
	}
	return err
}

// envRefs reads the configMaps and secrets of one container's environment,
// each at most once.
type envRefs struct {
	ctx        context.Context
	objects    EnvObjects // nil = standalone
	namespace  string
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
}

func (e *envRefs) configMap(name string) (*v1.ConfigMap, error) {
	if cm, ok := e.configMaps[name]; ok {
		return cm, nil
	}
	if e.objects == nil {
		return nil, fmt.Errorf("couldn't get configMap %s/%s: %w", e.namespace, name, ErrNeedsAPIServer)
	}
	cm, err := e.objects.GetConfigMap(e.ctx, e.namespace, name)
	if err != nil {
		return nil, err
	}
	if e.configMaps == nil {
		e.configMaps = map[string]*v1.ConfigMap{}
	}
	e.configMaps[name] = cm
	return cm, nil
}

func (e *envRefs) secret(name string) (*v1.Secret, error) {
	if s, ok := e.secrets[name]; ok {
		return s, nil
	}
	if e.objects == nil {
		return nil, fmt.Errorf("couldn't get secret %s/%s: %w", e.namespace, name, ErrNeedsAPIServer)
	}
	s, err := e.objects.GetSecret(e.ctx, e.namespace, name)
	if err != nil {
		return nil, err
	}
	if e.secrets == nil {
		e.secrets = map[string]*v1.Secret{}
	}
	e.secrets[name] = s
	return s, nil
}

// configMapKey resolves a configMapKeyRef; skip is true when an optional
// configMap or key is missing.
func (e *envRefs) configMapKey(ref *v1.ConfigMapKeySelector) (string, bool, error) {
	optional := ref.Optional != nil && *ref.Optional
	cm, err := e.configMap(ref.Name)
	if err != nil {
		if skipOptional(ref.Optional, err) == nil {
			return "", true, nil
		}
		return "", false, err
	}
	v, ok := cm.Data[ref.Key]
	if !ok {
		if optional {
			return "", true, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, e.namespace, ref.Name)
	}
	return v, false, nil
}

// secretKey resolves a secretKeyRef; skip is true when an optional secret or
// key is missing.
func (e *envRefs) secretKey(ref *v1.SecretKeySelector) (string, bool, error) {
	optional := ref.Optional != nil && *ref.Optional
	s, err := e.secret(ref.Name)
	if err != nil {
		if skipOptional(ref.Optional, err) == nil {
			return "", true, nil
		}
		return "", false, err
	}
	v, ok := s.Data[ref.Key]
	if !ok {
		if optional {
			return "", true, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, e.namespace, ref.Name)
	}
	return string(v), false, nil
}

// kubernetesService is the service whose links every pod gets, from namespace
// default (upstream masterServices).
const kubernetesService = "kubernetes"

// addServiceEnv adds the service-link variables (upstream getServiceEnvVarMap):
// the services of the pod's namespace when spec.enableServiceLinks is unset or
// true, and the "kubernetes" service of namespace default always. Pods from the
// API wait until the services were listed once.
func (r *envResolver) addServiceEnv(pod *v1.Pod, env *orderedEnv) error {
	if r.services == nil {
		return nil
	}
	if !kubecontainer.IsStaticPod(pod) && !r.services.HasSynced() {
		return errors.New("services have not yet been read at least once, cannot construct envvars")
	}
	byName := map[string]*v1.Service{}
	if links := pod.Spec.EnableServiceLinks; links == nil || *links {
		list, err := r.services.ListServices(pod.Namespace)
		if err != nil {
			return fmt.Errorf("failed to list services when setting up env vars: %w", err)
		}
		for _, s := range list {
			if serviceIPSet(s) {
				byName[s.Name] = s
			}
		}
	}
	if _, ok := byName[kubernetesService]; !ok {
		list, err := r.services.ListServices(metav1.NamespaceDefault)
		if err != nil {
			return fmt.Errorf("failed to list services when setting up env vars: %w", err)
		}
		for _, s := range list {
			if s.Name == kubernetesService && serviceIPSet(s) {
				byName[s.Name] = s
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		for _, v := range serviceEnvVars(byName[name]) {
			env.set(v.Name, v.Value)
		}
	}
	return nil
}

// serviceIPSet reports whether the service has a cluster IP (not "" or "None")
// and a port.
func serviceIPSet(s *v1.Service) bool {
	return s.Spec.ClusterIP != "" && s.Spec.ClusterIP != v1.ClusterIPNone && len(s.Spec.Ports) > 0
}

// serviceEnvVars returns a service's link variables (upstream
// envvars.FromServices): FOO_SERVICE_HOST, FOO_SERVICE_PORT,
// FOO_SERVICE_PORT_<NAME> per named port, and the Docker-link style FOO_PORT,
// FOO_PORT_<port>_<PROTO>{,_PROTO,_PORT,_ADDR}.
func serviceEnvVars(s *v1.Service) []kubecontainer.EnvVar {
	prefix := strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
	ip := s.Spec.ClusterIP
	vars := []kubecontainer.EnvVar{
		{Name: prefix + "_SERVICE_HOST", Value: ip},
		{Name: prefix + "_SERVICE_PORT", Value: strconv.Itoa(int(s.Spec.Ports[0].Port))},
	}
	for _, p := range s.Spec.Ports {
		if p.Name != "" {
			name := prefix + "_SERVICE_PORT_" + strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_"))
			vars = append(vars, kubecontainer.EnvVar{Name: name, Value: strconv.Itoa(int(p.Port))})
		}
	}
	for i, p := range s.Spec.Ports {
		proto := strings.ToLower(string(v1.ProtocolTCP))
		if p.Protocol != "" {
			proto = strings.ToLower(string(p.Protocol))
		}
		port := strconv.Itoa(int(p.Port))
		url := proto + "://" + net.JoinHostPort(ip, port)
		if i == 0 {
			vars = append(vars, kubecontainer.EnvVar{Name: prefix + "_PORT", Value: url})
		}
		portPrefix := prefix + "_PORT_" + port + "_" + strings.ToUpper(proto)
		vars = append(vars,
			kubecontainer.EnvVar{Name: portPrefix, Value: url},
			kubecontainer.EnvVar{Name: portPrefix + "_PROTO", Value: proto},
			kubecontainer.EnvVar{Name: portPrefix + "_PORT", Value: port},
			kubecontainer.EnvVar{Name: portPrefix + "_ADDR", Value: ip},
		)
	}
	return vars
}

// fieldRef resolves a downward API field of the pod: the spec and status
// fields env variables may use, and the metadata fields (volumes.PodFieldValue).
func (r *envResolver) fieldRef(pod *v1.Pod, fs *v1.ObjectFieldSelector, podIP string, podIPs []string) (string, error) {
	if fs.APIVersion != "" && fs.APIVersion != "v1" {
		return "", fmt.Errorf("unsupported fieldRef apiVersion %q", fs.APIVersion)
	}
	podIPs = kubecontainer.SortPodIPs(r.nodeIP, podIPs)
	if len(podIPs) > 0 {
		podIP = podIPs[0]
	}
	switch path := fs.FieldPath; path {
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
		// metadata.* as the downwardAPI volume resolves it.
		return volumes.PodFieldValue(pod, path)
	}
}

// resourceFieldRef resolves requests/limits of this or another container of
// the pod (resources.ResolveFieldRef).
func (r *envResolver) resourceFieldRef(pod *v1.Pod, c *v1.Container, fs *v1.ResourceFieldSelector) (string, error) {
	var allocatable v1.ResourceList
	if r.node != nil {
		allocatable = r.node.Allocatable()
	}
	return resources.ResolveFieldRef(fs, pod, c, allocatable)
}

// orderedEnv keeps variables in first-definition order; redefinition replaces.
type orderedEnv struct {
	index map[string]int
	vars  []kubecontainer.EnvVar
}

func newOrderedEnv() *orderedEnv { return &orderedEnv{index: map[string]int{}} }

func (e *orderedEnv) set(name, value string) {
	if i, ok := e.index[name]; ok {
		e.vars[i].Value = value
		return
	}
	e.index[name] = len(e.vars)
	e.vars = append(e.vars, kubecontainer.EnvVar{Name: name, Value: value})
}

func (e *orderedEnv) lookup(name string) (string, bool) {
	i, ok := e.index[name]
	if !ok {
		return "", false
	}
	return e.vars[i].Value, true
}

func (e *orderedEnv) list() []kubecontainer.EnvVar { return e.vars }
