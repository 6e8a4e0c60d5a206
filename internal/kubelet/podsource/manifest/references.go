package manifest

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// checkAPIReferences rejects static pods that reference API objects (service accounts,
// secrets, config maps, claims, CSI drivers), as upstream does with
// PreventStaticPodAPIReferences (on by default): a static pod must run without an API
// server. The error names the first offending field.
func checkAPIReferences(pod *v1.Pod) error {
	spec := &pod.Spec
	path := field.NewPath("spec")
	forbid := func(p *field.Path, resource string) error {
		return field.Forbidden(p, "static pods may not reference "+resource)
	}
	if spec.ServiceAccountName != "" {
		return forbid(path.Child("serviceAccountName"), "serviceaccounts")
	}
	if len(spec.ImagePullSecrets) > 0 {
		return forbid(path.Child("imagePullSecrets"), "secrets")
	}
	if len(spec.ResourceClaims) > 0 {
		return forbid(path.Child("resourceClaims"), "resourceclaims")
	}
	for _, group := range []struct {
		name       string
		containers []v1.Container
	}{{"initContainers", spec.InitContainers}, {"containers", spec.Containers}} {
		for i := range group.containers {
			if err := containerReferences(&group.containers[i], path.Child(group.name).Index(i)); err != nil {
				return err
			}
		}
	}
	for i := range spec.Volumes {
		p := path.Child("volumes").Index(i)
		if resource := volumeReference(&spec.Volumes[i].VolumeSource); resource != "" {
			return forbid(p, resource)
		}
	}
	return nil
}

func containerReferences(c *v1.Container, path *field.Path) error {
	for i, e := range c.Env {
		p := path.Child("env").Index(i).Child("valueFrom")
		switch {
		case e.ValueFrom == nil:
		case e.ValueFrom.SecretKeyRef != nil:
			return field.Forbidden(p.Child("secretKeyRef"), "static pods may not reference secrets")
		case e.ValueFrom.ConfigMapKeyRef != nil:
			return field.Forbidden(p.Child("configMapKeyRef"), "static pods may not reference configmaps")
		}
	}
	for i, e := range c.EnvFrom {
		p := path.Child("envFrom").Index(i)
		if e.SecretRef != nil {
			return field.Forbidden(p.Child("secretRef"), "static pods may not reference secrets")
		}
		if e.ConfigMapRef != nil {
			return field.Forbidden(p.Child("configMapRef"), "static pods may not reference configmaps")
		}
	}
	return nil
}

// volumeReference names the API resource a volume source needs, or "".
func volumeReference(src *v1.VolumeSource) string {
	switch {
	case src.ConfigMap != nil:
		return "configmaps (via configmap volumes)"
	case src.Secret != nil:
		return "secrets (via secret volumes)"
	case src.PersistentVolumeClaim != nil:
		return "persistentvolumeclaims"
	case src.Ephemeral != nil:
		return "persistentvolumeclaims (via ephemeral volumes)"
	case src.CSI != nil:
		return "csidrivers (via CSI volumes)"
	case src.Glusterfs != nil:
		return "endpoints (via glusterFS volumes)"
	case src.AzureFile != nil:
		return "secrets (via azureFile volumes)"
	case src.Projected != nil:
		return projectedReference(src.Projected.Sources)
	}
	return ""
}

func projectedReference(sources []v1.VolumeProjection) string {
	for _, s := range sources {
		switch {
		case s.ConfigMap != nil:
			return "configmaps (via projected volumes)"
		case s.Secret != nil:
			return "secrets (via projected volumes)"
		case s.ServiceAccountToken != nil:
			return "serviceaccounts (via projected volumes)"
		case s.ClusterTrustBundle != nil:
			return "clustertrustbundles"
		case s.PodCertificate != nil:
			return "podcertificates"
		}
	}
	return ""
}
