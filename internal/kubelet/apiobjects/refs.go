package apiobjects

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// podSecretNames are the secrets a pod references, as upstream's
// VisitPodSecretNames lists them: image pull secrets, every container's
// env and envFrom (init and ephemeral ones too), and the volumes that name
// a secret.
func podSecretNames(pod *v1.Pod) sets.Set[string] {
	names := sets.New[string]()
	for _, ref := range pod.Spec.ImagePullSecrets {
		names.Insert(ref.Name)
	}
	eachContainerEnv(&pod.Spec, func(env []v1.EnvVar, from []v1.EnvFromSource) {
		for _, f := range from {
			if f.SecretRef != nil {
				names.Insert(f.SecretRef.Name)
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				names.Insert(e.ValueFrom.SecretKeyRef.Name)
			}
		}
	})
	for i := range pod.Spec.Volumes {
		s := &pod.Spec.Volumes[i].VolumeSource
		switch {
		case s.AzureFile != nil:
			names.Insert(s.AzureFile.SecretName)
		case s.CephFS != nil && s.CephFS.SecretRef != nil:
			names.Insert(s.CephFS.SecretRef.Name)
		case s.Cinder != nil && s.Cinder.SecretRef != nil:
			names.Insert(s.Cinder.SecretRef.Name)
		case s.FlexVolume != nil && s.FlexVolume.SecretRef != nil:
			names.Insert(s.FlexVolume.SecretRef.Name)
		case s.Projected != nil:
			for _, p := range s.Projected.Sources {
				if p.Secret != nil {
					names.Insert(p.Secret.Name)
				}
			}
		case s.RBD != nil && s.RBD.SecretRef != nil:
			names.Insert(s.RBD.SecretRef.Name)
		case s.Secret != nil:
			names.Insert(s.Secret.SecretName)
		case s.ScaleIO != nil && s.ScaleIO.SecretRef != nil:
			names.Insert(s.ScaleIO.SecretRef.Name)
		case s.ISCSI != nil && s.ISCSI.SecretRef != nil:
			names.Insert(s.ISCSI.SecretRef.Name)
		case s.StorageOS != nil && s.StorageOS.SecretRef != nil:
			names.Insert(s.StorageOS.SecretRef.Name)
		case s.CSI != nil && s.CSI.NodePublishSecretRef != nil:
			names.Insert(s.CSI.NodePublishSecretRef.Name)
		}
	}
	names.Delete("")
	return names
}

// podConfigMapNames are the configMaps a pod references (upstream's
// VisitPodConfigmapNames): every container's env and envFrom, configMap
// volumes and projected configMap sources.
func podConfigMapNames(pod *v1.Pod) sets.Set[string] {
	names := sets.New[string]()
	eachContainerEnv(&pod.Spec, func(env []v1.EnvVar, from []v1.EnvFromSource) {
		for _, f := range from {
			if f.ConfigMapRef != nil {
				names.Insert(f.ConfigMapRef.Name)
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				names.Insert(e.ValueFrom.ConfigMapKeyRef.Name)
			}
		}
	})
	for i := range pod.Spec.Volumes {
		s := &pod.Spec.Volumes[i].VolumeSource
		switch {
		case s.Projected != nil:
			for _, p := range s.Projected.Sources {
				if p.ConfigMap != nil {
					names.Insert(p.ConfigMap.Name)
				}
			}
		case s.ConfigMap != nil:
			names.Insert(s.ConfigMap.Name)
		}
	}
	names.Delete("")
	return names
}

// eachContainerEnv calls fn with the env and envFrom of every init, regular
// and ephemeral container.
func eachContainerEnv(spec *v1.PodSpec, fn func([]v1.EnvVar, []v1.EnvFromSource)) {
	for _, c := range spec.InitContainers {
		fn(c.Env, c.EnvFrom)
	}
	for _, c := range spec.Containers {
		fn(c.Env, c.EnvFrom)
	}
	for _, c := range spec.EphemeralContainers {
		fn(c.Env, c.EnvFrom)
	}
}
