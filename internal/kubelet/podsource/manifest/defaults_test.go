package manifest

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestSetDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc  string
		edit  func(p *v1.Pod) // applied to a minimal pod before SetDefaults
		check func(t *testing.T, p *v1.Pod)
	}{
		{"restartPolicy Always", nil, func(t *testing.T, p *v1.Pod) {
			expect(t, p.Spec.RestartPolicy, v1.RestartPolicyAlways)
		}},
		{"restartPolicy kept", func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever }, func(t *testing.T, p *v1.Pod) {
			expect(t, p.Spec.RestartPolicy, v1.RestartPolicyNever)
		}},
		{"dnsPolicy ClusterFirst", nil, func(t *testing.T, p *v1.Pod) { expect(t, p.Spec.DNSPolicy, v1.DNSClusterFirst) }},
		{"terminationGracePeriodSeconds 30", nil, func(t *testing.T, p *v1.Pod) {
			expect(t, *p.Spec.TerminationGracePeriodSeconds, int64(30))
		}},
		{"terminationGracePeriodSeconds 0 kept", func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = new(int64) },
			func(t *testing.T, p *v1.Pod) { expect(t, *p.Spec.TerminationGracePeriodSeconds, int64(0)) }},
		{"schedulerName", nil, func(t *testing.T, p *v1.Pod) { expect(t, p.Spec.SchedulerName, "default-scheduler") }},
		{"securityContext", nil, func(t *testing.T, p *v1.Pod) {
			if p.Spec.SecurityContext == nil {
				t.Error("securityContext is nil")
			}
		}},
		{"enableServiceLinks", nil, func(t *testing.T, p *v1.Pod) { expect(t, *p.Spec.EnableServiceLinks, true) }},
		{"imagePullPolicy IfNotPresent for a tag", nil, func(t *testing.T, p *v1.Pod) {
			expect(t, p.Spec.Containers[0].ImagePullPolicy, v1.PullIfNotPresent)
		}},
		{"imagePullPolicy Always for latest", func(p *v1.Pod) { p.Spec.Containers[0].Image = "busybox:latest" },
			func(t *testing.T, p *v1.Pod) { expect(t, p.Spec.Containers[0].ImagePullPolicy, v1.PullAlways) }},
		{"imagePullPolicy Always without tag", func(p *v1.Pod) { p.Spec.Containers[0].Image = "localhost:5000/busybox" },
			func(t *testing.T, p *v1.Pod) { expect(t, p.Spec.Containers[0].ImagePullPolicy, v1.PullAlways) }},
		{"imagePullPolicy IfNotPresent for a digest", func(p *v1.Pod) { p.Spec.Containers[0].Image = "busybox@sha256:abcd" },
			func(t *testing.T, p *v1.Pod) { expect(t, p.Spec.Containers[0].ImagePullPolicy, v1.PullIfNotPresent) }},
		{"imagePullPolicy kept", func(p *v1.Pod) { p.Spec.Containers[0].ImagePullPolicy = v1.PullNever },
			func(t *testing.T, p *v1.Pod) { expect(t, p.Spec.Containers[0].ImagePullPolicy, v1.PullNever) }},
		{"termination message", nil, func(t *testing.T, p *v1.Pod) {
			expect(t, p.Spec.Containers[0].TerminationMessagePath, "/dev/termination-log")
			expect(t, p.Spec.Containers[0].TerminationMessagePolicy, v1.TerminationMessageReadFile)
		}},
		{"init container defaults", func(p *v1.Pod) { p.Spec.InitContainers = []v1.Container{{Name: "i", Image: "x"}} },
			func(t *testing.T, p *v1.Pod) {
				expect(t, p.Spec.InitContainers[0].ImagePullPolicy, v1.PullAlways)
				expect(t, p.Spec.InitContainers[0].TerminationMessagePolicy, v1.TerminationMessageReadFile)
			}},
		{"port protocol TCP", func(p *v1.Pod) { p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80}} },
			func(t *testing.T, p *v1.Pod) {
				expect(t, p.Spec.Containers[0].Ports[0].Protocol, v1.ProtocolTCP)
				expect(t, p.Spec.Containers[0].Ports[0].HostPort, int32(0))
			}},
		{"hostNetwork ports", func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80}}
		}, func(t *testing.T, p *v1.Pod) { expect(t, p.Spec.Containers[0].Ports[0].HostPort, int32(80)) }},
		{"probe defaults", func(p *v1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(80)}}}
		}, func(t *testing.T, p *v1.Pod) {
			pr := p.Spec.Containers[0].LivenessProbe
			expect(t, [4]int32{pr.TimeoutSeconds, pr.PeriodSeconds, pr.SuccessThreshold, pr.FailureThreshold}, [4]int32{1, 10, 1, 3})
			expect(t, pr.HTTPGet.Path, "/")
			expect(t, pr.HTTPGet.Scheme, v1.URISchemeHTTP)
		}},
		{"lifecycle httpGet defaults", func(p *v1.Pod) {
			p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(80)}}}
		}, func(t *testing.T, p *v1.Pod) { expect(t, p.Spec.Containers[0].Lifecycle.PreStop.HTTPGet.Path, "/") }},
		{"requests default to limits", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{
				Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("64Mi")},
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")},
			}
		}, func(t *testing.T, p *v1.Pod) {
			r := p.Spec.Containers[0].Resources.Requests
			expect(t, r.Cpu().String(), "100m")
			expect(t, r.Memory().String(), "64Mi")
			expect(t, len(p.Spec.Containers[0].ResizePolicy), 0) // upstream v1.37 defaults no resize policy
		}},
		{"fieldRef apiVersion", func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "N", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
		}, func(t *testing.T, p *v1.Pod) {
			expect(t, p.Spec.Containers[0].Env[0].ValueFrom.FieldRef.APIVersion, "v1")
		}},
		{"volume without source is emptyDir", func(p *v1.Pod) { p.Spec.Volumes = []v1.Volume{{Name: "v"}} },
			func(t *testing.T, p *v1.Pod) {
				if ed := p.Spec.Volumes[0].EmptyDir; ed == nil || ed.Medium != v1.StorageMediumDefault {
					t.Errorf("emptyDir = %+v", ed)
				}
			}},
		{"hostPath type empty", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/tmp"}}}}
		}, func(t *testing.T, p *v1.Pod) { expect(t, *p.Spec.Volumes[0].HostPath.Type, v1.HostPathUnset) }},
		{"downwardAPI default mode", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
				Items: []v1.DownwardAPIVolumeFile{{Path: "n", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}}}
		}, func(t *testing.T, p *v1.Pod) {
			expect(t, *p.Spec.Volumes[0].DownwardAPI.DefaultMode, int32(0o644))
			expect(t, p.Spec.Volumes[0].DownwardAPI.Items[0].FieldRef.APIVersion, "v1")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox:1.36"}}}}
			if tc.edit != nil {
				tc.edit(pod)
			}
			SetDefaults(pod)
			tc.check(t, pod)
		})
	}
}

func expect[T comparable](t *testing.T, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("got %v, want %v", got, want)
	}
}
