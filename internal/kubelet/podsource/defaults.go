package podsource

import (
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
)

// SetDefaults fills in the v1 API defaults the kubelet relies on, as the API server's
// defaulting does for pods (k8s.io/kubernetes pkg/apis/core/v1 defaults): pod spec
// (restartPolicy Always, dnsPolicy ClusterFirst, terminationGracePeriodSeconds 30,
// schedulerName, securityContext {}, enableServiceLinks true, host ports for hostNetwork
// pods), containers (imagePullPolicy, termination message path and policy, port protocol,
// requests default to limits, resize policy, probe and handler defaults, fieldRef
// apiVersion) and volumes (emptyDir when no source, hostPath type "", default modes,
// service account token expiry). Values already set are kept.
func SetDefaults(pod *v1.Pod) {
	spec := &pod.Spec
	setPodSpecDefaults(spec)
	for i := range spec.InitContainers {
		setContainerDefaults(&spec.InitContainers[i], false)
	}
	for i := range spec.Containers {
		setContainerDefaults(&spec.Containers[i], true)
	}
	for i := range spec.EphemeralContainers {
		setContainerDefaults((*v1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon), false)
	}
	for i := range spec.Volumes {
		setVolumeDefaults(&spec.Volumes[i])
	}
	if spec.HostNetwork {
		defaultHostNetworkPorts(spec.Containers)
		defaultHostNetworkPorts(spec.InitContainers)
	}
}

func setPodSpecDefaults(spec *v1.PodSpec) {
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = v1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = v1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &v1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		grace := int64(v1.DefaultTerminationGracePeriodSeconds)
		spec.TerminationGracePeriodSeconds = &grace
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = v1.DefaultSchedulerName
	}
	if spec.EnableServiceLinks == nil {
		links := v1.DefaultEnableServiceLinks
		spec.EnableServiceLinks = &links
	}
}

// setContainerDefaults defaults one container; regular containers (not init or
// ephemeral ones) also get the default resize policy.
func setContainerDefaults(c *v1.Container, regular bool) {
	if c.ImagePullPolicy == "" {
		if imageTag(c.Image) == "latest" {
			c.ImagePullPolicy = v1.PullAlways
		} else {
			c.ImagePullPolicy = v1.PullIfNotPresent
		}
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = v1.ProtocolTCP
		}
	}
	setResourceDefaults(&c.Resources)
	if regular {
		setResizePolicyDefaults(c)
	}
	for _, p := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		setProbeDefaults(p)
	}
	if c.Lifecycle != nil {
		setHandlerDefaults(c.Lifecycle.PostStart)
		setHandlerDefaults(c.Lifecycle.PreStop)
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil {
			setFieldRefDefaults(vf.FieldRef)
		}
	}
}

// imageTag returns the image's tag: "latest" when the reference has neither a tag nor a
// digest, "" when it has only a digest.
func imageTag(image string) string {
	name, _, hasDigest := strings.Cut(image, "@")
	lastSlash := strings.LastIndex(name, "/")
	if i := strings.LastIndex(name, ":"); i > lastSlash {
		return name[i+1:]
	}
	if hasDigest {
		return ""
	}
	return "latest"
}

// setResourceDefaults rounds quantities up to milli precision and defaults requests to
// limits.
func setResourceDefaults(r *v1.ResourceRequirements) {
	roundUpMilli(r.Limits)
	roundUpMilli(r.Requests)
	if r.Limits == nil {
		return
	}
	if r.Requests == nil {
		r.Requests = v1.ResourceList{}
	}
	for name, limit := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			r.Requests[name] = limit.DeepCopy()
		}
	}
}

func roundUpMilli(list v1.ResourceList) {
	for name, q := range list {
		q.RoundUp(-3)
		list[name] = q
	}
}

// setResizePolicyDefaults adds RestartPolicy NotRequired for requested cpu and memory
// without a policy (InPlacePodVerticalScaling is on by default upstream).
func setResizePolicyDefaults(c *v1.Container) {
	if c.Resources.Requests == nil {
		return
	}
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		if _, ok := c.Resources.Requests[name]; !ok {
			continue
		}
		found := false
		for _, p := range c.ResizePolicy {
			found = found || p.ResourceName == name
		}
		if !found {
			c.ResizePolicy = append(c.ResizePolicy, v1.ContainerResizePolicy{ResourceName: name, RestartPolicy: v1.NotRequired})
		}
	}
}

func setProbeDefaults(p *v1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	setHTTPGetDefaults(p.HTTPGet)
}

func setHandlerDefaults(h *v1.LifecycleHandler) {
	if h != nil {
		setHTTPGetDefaults(h.HTTPGet)
	}
}

func setHTTPGetDefaults(g *v1.HTTPGetAction) {
	if g == nil {
		return
	}
	if g.Path == "" {
		g.Path = "/"
	}
	if g.Scheme == "" {
		g.Scheme = v1.URISchemeHTTP
	}
}

func setFieldRefDefaults(f *v1.ObjectFieldSelector) {
	if f != nil && f.APIVersion == "" {
		f.APIVersion = "v1"
	}
}

func setVolumeDefaults(vol *v1.Volume) {
	src := &vol.VolumeSource
	if *src == (v1.VolumeSource{}) {
		src.EmptyDir = &v1.EmptyDirVolumeSource{}
	}
	if src.HostPath != nil && src.HostPath.Type == nil {
		unset := v1.HostPathUnset
		src.HostPath.Type = &unset
	}
	if src.Secret != nil {
		defaultMode(&src.Secret.DefaultMode, v1.SecretVolumeSourceDefaultMode)
	}
	if src.ConfigMap != nil {
		defaultMode(&src.ConfigMap.DefaultMode, v1.ConfigMapVolumeSourceDefaultMode)
	}
	if src.DownwardAPI != nil {
		defaultMode(&src.DownwardAPI.DefaultMode, v1.DownwardAPIVolumeSourceDefaultMode)
		for i := range src.DownwardAPI.Items {
			setFieldRefDefaults(src.DownwardAPI.Items[i].FieldRef)
		}
	}
	if src.Projected != nil {
		defaultMode(&src.Projected.DefaultMode, v1.ProjectedVolumeSourceDefaultMode)
		setProjectionDefaults(src.Projected.Sources)
	}
}

func setProjectionDefaults(sources []v1.VolumeProjection) {
	for i := range sources {
		if t := sources[i].ServiceAccountToken; t != nil && t.ExpirationSeconds == nil {
			hour := int64(time.Hour / time.Second)
			t.ExpirationSeconds = &hour
		}
		if d := sources[i].DownwardAPI; d != nil {
			for j := range d.Items {
				setFieldRefDefaults(d.Items[j].FieldRef)
			}
		}
	}
}

func defaultMode(mode **int32, def int32) {
	if *mode == nil {
		m := def
		*mode = &m
	}
}

// defaultHostNetworkPorts sets hostPort = containerPort where unset (host network pods
// share the node's ports).
func defaultHostNetworkPorts(containers []v1.Container) {
	for i := range containers {
		for j := range containers[i].Ports {
			if containers[i].Ports[j].HostPort == 0 {
				containers[i].Ports[j].HostPort = containers[i].Ports[j].ContainerPort
			}
		}
	}
}
