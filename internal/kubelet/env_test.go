package kubelet

import (
	"errors"
	"net"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelet-dockershim/kubelet/internal/kuberuntime"
)

func envPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "prod", UID: "uid-123",
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"note": "hi"},
		},
		Spec: v1.PodSpec{
			NodeName: "node-1", ServiceAccountName: "sa",
			Containers: []v1.Container{
				{Name: "main", Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("64Mi")},
					Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")},
				}},
				{Name: "side", Resources: v1.ResourceRequirements{
					Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")},
				}},
			},
		},
	}
}

func fieldEnv(path string) v1.EnvVar {
	return v1.EnvVar{Name: "V", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}}
}

func resourceEnv(res, container, divisor string) v1.EnvVar {
	sel := &v1.ResourceFieldSelector{Resource: res, ContainerName: container}
	if divisor != "" {
		sel.Divisor = resource.MustParse(divisor)
	}
	return v1.EnvVar{Name: "V", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: sel}}
}

func TestEnvResolution(t *testing.T) {
	t.Parallel()
	optional := true
	capacity := v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse("4"),
		v1.ResourceMemory:           resource.MustParse("8Gi"),
		v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	cmKey := &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "k"}
	optCMKey := cmKey.DeepCopy()
	optCMKey.Optional = &optional
	secretKey := &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Key: "k"}
	optSecretKey := secretKey.DeepCopy()
	optSecretKey.Optional = &optional
	for _, tc := range []struct {
		desc    string
		env     []v1.EnvVar
		envFrom []v1.EnvFromSource
		podIPs  []string
		want    string // "A=1,B=2"
		wantErr error
	}{
		{desc: "plain value", env: []v1.EnvVar{{Name: "A", Value: "1"}}, want: "A=1"},
		{desc: "metadata.name", env: []v1.EnvVar{fieldEnv("metadata.name")}, want: "V=web"},
		{desc: "metadata.namespace", env: []v1.EnvVar{fieldEnv("metadata.namespace")}, want: "V=prod"},
		{desc: "metadata.uid", env: []v1.EnvVar{fieldEnv("metadata.uid")}, want: "V=uid-123"},
		{desc: "metadata.labels subscript", env: []v1.EnvVar{fieldEnv("metadata.labels['app']")}, want: "V=web"},
		{desc: "metadata.annotations subscript", env: []v1.EnvVar{fieldEnv("metadata.annotations['note']")}, want: "V=hi"},
		{desc: "metadata.labels all", env: []v1.EnvVar{fieldEnv("metadata.labels")}, want: "V=app=\"web\"\ntier=\"front\""},
		{desc: "spec.nodeName", env: []v1.EnvVar{fieldEnv("spec.nodeName")}, want: "V=node-1"},
		{desc: "spec.serviceAccountName", env: []v1.EnvVar{fieldEnv("spec.serviceAccountName")}, want: "V=sa"},
		{desc: "status.hostIP", env: []v1.EnvVar{fieldEnv("status.hostIP")}, want: "V=192.168.1.10"},
		{desc: "status.hostIPs", env: []v1.EnvVar{fieldEnv("status.hostIPs")}, want: "V=192.168.1.10"},
		{desc: "status.podIP", env: []v1.EnvVar{fieldEnv("status.podIP")}, podIPs: []string{"fd00::5", "10.1.0.5"}, want: "V=10.1.0.5"},
		{desc: "status.podIPs", env: []v1.EnvVar{fieldEnv("status.podIPs")}, podIPs: []string{"fd00::5", "10.1.0.5"}, want: "V=10.1.0.5,fd00::5"},
		{desc: "unsupported field", env: []v1.EnvVar{fieldEnv("spec.hostname")}, wantErr: errors.New("unsupported fieldPath")},
		{desc: "requests.cpu in millicores", env: []v1.EnvVar{resourceEnv("requests.cpu", "", "1m")}, want: "V=250"},
		{desc: "requests.cpu rounds up to cores", env: []v1.EnvVar{resourceEnv("requests.cpu", "", "")}, want: "V=1"},
		{desc: "requests.memory in Mi", env: []v1.EnvVar{resourceEnv("requests.memory", "", "1Mi")}, want: "V=64"},
		{desc: "limits.memory", env: []v1.EnvVar{resourceEnv("limits.memory", "", "")}, want: "V=134217728"},
		{desc: "unset limits.cpu defaults to node capacity", env: []v1.EnvVar{resourceEnv("limits.cpu", "", "")}, want: "V=4"},
		{desc: "unset limits.ephemeral-storage defaults to capacity", env: []v1.EnvVar{resourceEnv("limits.ephemeral-storage", "", "1Gi")}, want: "V=100"},
		{desc: "unset request is zero", env: []v1.EnvVar{resourceEnv("requests.ephemeral-storage", "", "")}, want: "V=0"},
		{desc: "other container", env: []v1.EnvVar{resourceEnv("limits.cpu", "side", "1m")}, want: "V=1500"},
		{desc: "unknown container", env: []v1.EnvVar{resourceEnv("limits.cpu", "nope", "")}, wantErr: errors.New("not found")},
		{desc: "unsupported resource", env: []v1.EnvVar{resourceEnv("limits.gpu", "", "")}, wantErr: errors.New("unsupported container resource")},
		{
			desc: "expansion of earlier variables",
			env:  []v1.EnvVar{{Name: "A", Value: "x"}, {Name: "B", Value: "$(A)-$(C)-$$(A)-$(A"}, {Name: "C", Value: "late"}},
			want: "A=x,B=x-$(C)-$(A)-$(A,C=late",
		},
		{desc: "expansion of a field ref", env: []v1.EnvVar{fieldEnv("metadata.name"), {Name: "B", Value: "$(V).svc"}}, want: "V=web,B=web.svc"},
		{desc: "redefinition replaces in place", env: []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}, {Name: "A", Value: "3"}}, want: "A=3,B=2"},
		{desc: "required configMapKeyRef", env: []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: cmKey}}}, wantErr: ErrNeedsAPIServer},
		{desc: "optional configMapKeyRef is skipped", env: []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: optCMKey}}, {Name: "B", Value: "b"}}, want: "B=b"},
		{desc: "required secretKeyRef", env: []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{SecretKeyRef: secretKey}}}, wantErr: ErrNeedsAPIServer},
		{desc: "optional secretKeyRef is skipped", env: []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{SecretKeyRef: optSecretKey}}}, want: ""},
		{desc: "required envFrom configMap", envFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}}, wantErr: ErrNeedsAPIServer},
		{desc: "optional envFrom secret", envFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Optional: &optional}}}, env: []v1.EnvVar{{Name: "A", Value: "1"}}, want: "A=1"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			r := envResolver{nodeIP: net.ParseIP("192.168.1.10"), capacity: func() v1.ResourceList { return capacity }}
			pod := envPod()
			c := &pod.Spec.Containers[0]
			c.Env, c.EnvFrom = tc.env, tc.envFrom
			got, err := r.resolve(pod, c, "", tc.podIPs)
			if tc.wantErr != nil {
				if err == nil || !(errors.Is(err, tc.wantErr) || strings.Contains(err.Error(), tc.wantErr.Error())) {
					t.Fatalf("error = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := joinEnv(got); s != tc.want {
				t.Errorf("env = %q, want %q", s, tc.want)
			}
		})
	}
}

func joinEnv(envs []kuberuntime.EnvVar) string {
	parts := make([]string, 0, len(envs))
	for _, e := range envs {
		parts = append(parts, e.Name+"="+e.Value)
	}
	return strings.Join(parts, ",")
}

func TestSortPodIPs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc   string
		nodeIP string
		ips    []string
		want   string
	}{
		{desc: "v4 node", nodeIP: "10.0.0.1", ips: []string{"fd00::1", "10.1.0.1", "10.1.0.2"}, want: "10.1.0.1,fd00::1"},
		{desc: "v6 node", nodeIP: "fd00::10", ips: []string{"10.1.0.1", "fd00::1"}, want: "fd00::1,10.1.0.1"},
		{desc: "no node IP", ips: []string{"fd00::1"}, want: "fd00::1"},
		{desc: "garbage dropped", ips: []string{"nope", "10.1.0.1"}, want: "10.1.0.1"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := strings.Join(sortPodIPs(net.ParseIP(tc.nodeIP), tc.ips), ","); got != tc.want {
				t.Errorf("sortPodIPs = %s, want %s", got, tc.want)
			}
		})
	}
}
