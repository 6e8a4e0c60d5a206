package manifest

import (
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
)

// SetDefaults fills in the v1 API defaults, as upstream v1.37's defaulting of a
// decoded pod does with its default feature gates (k8s.io/kubernetes
// pkg/apis/core/v1 SetObjectDefaults_Pod): pod spec (service account names,
// restartPolicy Always, dnsPolicy ClusterFirst, terminationGracePeriodSeconds
// 30 and a negative one 1, schedulerName, securityContext {},
// enableServiceLinks true, host ports for hostNetwork pods), containers
// (imagePullPolicy, termination message path and policy, port protocol,
// quantities rounded to milli and requests defaulted to limits, probe and
// handler defaults, fieldRef apiVersion), volumes (emptyDir when no source,
// hostPath type "", default modes, token expiry, iSCSI, RBD, Azure disk and
// ScaleIO defaults, image pull policy, claim template volume mode) and the
// status's pod IPs. Values already set are kept. The static pod UID hashes
// the result (core.StaticPodUID), so every default counts: the golden test
// against upstream's kubelet keeps them exact.
func SetDefaults(pod *v1.Pod) {
	spec := &pod.Spec
	setPodSpecDefaults(spec)
	for i := range spec.InitContainers {
		setContainerDefaults(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		setContainerDefaults(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		setContainerDefaults((*v1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	for i := range spec.Volumes {
		setVolumeDefaults(&spec.Volumes[i])
	}
	roundUpMilli(spec.Overhead)
	if spec.Resources != nil {
		roundUpMilli(spec.Resources.Limits)
		roundUpMilli(spec.Resources.Requests)
	}
	setPodStatusDefaults(&pod.Status)
	if spec.HostNetwork {
		defaultHostNetworkPorts(spec.Containers)
		defaultHostNetworkPorts(spec.InitContainers)
	}
}

func setPodSpecDefaults(spec *v1.PodSpec) {
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount
	}
	spec.DeprecatedServiceAccount = spec.ServiceAccountName
	if spec.TerminationGracePeriodSeconds != nil && *spec.TerminationGracePeriodSeconds < 0 {
		one := int64(1) // a negative grace period becomes 1s, as the API server does
		spec.TerminationGracePeriodSeconds = &one
	}
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

// setContainerDefaults defaults one container.
func setContainerDefaults(c *v1.Container) {
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
			if vf.FileKeyRef != nil && vf.FileKeyRef.Optional == nil {
				vf.FileKeyRef.Optional = new(bool)
			}
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
	if p.GRPC != nil && p.GRPC.Service == nil {
		p.GRPC.Service = new(string)
	}
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
	if src.Image != nil && src.Image.PullPolicy == "" {
		src.Image.PullPolicy = v1.PullIfNotPresent
		if imageTag(src.Image.Reference) == "latest" {
			src.Image.PullPolicy = v1.PullAlways
		}
	}
	if src.ISCSI != nil && src.ISCSI.ISCSIInterface == "" {
		src.ISCSI.ISCSIInterface = "default"
	}
	if r := src.RBD; r != nil {
		setZeroString(&r.RBDPool, "rbd")
		setZeroString(&r.RadosUser, "admin")
		setZeroString(&r.Keyring, "/etc/ceph/keyring")
	}
	if d := src.AzureDisk; d != nil {
		if d.CachingMode == nil {
			m := v1.AzureDataDiskCachingReadWrite
			d.CachingMode = &m
		}
		if d.FSType == nil {
			fs := "ext4"
			d.FSType = &fs
		}
		if d.ReadOnly == nil {
			d.ReadOnly = new(bool)
		}
		if d.Kind == nil {
			k := v1.AzureSharedBlobDisk
			d.Kind = &k
		}
	}
	if sio := src.ScaleIO; sio != nil {
		setZeroString(&sio.StorageMode, "ThinProvisioned")
		setZeroString(&sio.FSType, "xfs")
	}
	if e := src.Ephemeral; e != nil && e.VolumeClaimTemplate != nil {
		spec := &e.VolumeClaimTemplate.Spec
		if spec.VolumeMode == nil {
			m := v1.PersistentVolumeFilesystem
			spec.VolumeMode = &m
		}
		roundUpMilli(spec.Resources.Limits)
		roundUpMilli(spec.Resources.Requests)
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

func setZeroString(p *string, def string) {
	if *p == "" {
		*p = def
	}
}

// setPodStatusDefaults keeps podIP and podIPs consistent, as the API
// server's defaulting does.
func setPodStatusDefaults(st *v1.PodStatus) {
	hasIP, hasIPs := st.PodIP != "", len(st.PodIPs) > 0
	switch {
	case hasIP && !hasIPs:
		st.PodIPs = []v1.PodIP{{IP: st.PodIP}}
	case !hasIP && hasIPs:
		st.PodIP = st.PodIPs[0].IP
	case hasIP && hasIPs && st.PodIPs[0].IP != st.PodIP:
		st.PodIPs = []v1.PodIP{{IP: st.PodIP}}
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
