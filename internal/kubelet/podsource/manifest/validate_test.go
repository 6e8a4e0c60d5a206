package manifest

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func validPod() *v1.Pod {
	pod := &v1.Pod{Spec: v1.PodSpec{
		Containers: []v1.Container{{
			Name: "c", Image: "busybox:1.36",
			VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
		}},
		Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
	}}
	pod.Name, pod.Namespace = "web-node-1", "default"
	SetDefaults(pod)
	return pod
}

func ptrTo[T any](v T) *T { return &v }

// initContainer is a valid init container with its own restartPolicy and rules.
func initContainer(policy v1.ContainerRestartPolicy, rules ...v1.ContainerRestartRule) v1.Container {
	return v1.Container{Name: "i", Image: "x", ImagePullPolicy: v1.PullAlways, TerminationMessagePolicy: v1.TerminationMessageReadFile,
		RestartPolicy: &policy, RestartPolicyRules: rules}
}

func restartRuleIn(action v1.ContainerRestartRuleAction, codes ...int32) v1.ContainerRestartRule {
	return v1.ContainerRestartRule{Action: action, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: codes}}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc    string
		edit    func(p *v1.Pod)
		wantErr string // substring; "" = valid
	}{
		{"valid", func(*v1.Pod) {}, ""},
		{"name required", func(p *v1.Pod) { p.Name = "" }, "metadata.name: Required value"},
		{"name not a subdomain", func(p *v1.Pod) { p.Name = "Web_1" }, "metadata.name: Invalid value"},
		{"namespace not a label", func(p *v1.Pod) { p.Namespace = "a.b" }, "metadata.namespace: Invalid value"},
		{"bad label", func(p *v1.Pod) { p.Labels = map[string]string{"a": "not valid!"} }, "metadata.labels: Invalid value"},
		{"no containers", func(p *v1.Pod) { p.Spec.Containers = nil }, "spec.containers: Required value"},
		{"container name", func(p *v1.Pod) { p.Spec.Containers[0].Name = "C" }, "spec.containers[0].name: Invalid value"},
		{"duplicate container name", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "c", Image: "x", ImagePullPolicy: v1.PullAlways, TerminationMessagePolicy: v1.TerminationMessageReadFile}}
		}, "spec.containers[0].name: Duplicate value"},
		{"image required", func(p *v1.Pod) { p.Spec.Containers[0].Image = "" }, "spec.containers[0].image: Required value"},
		{"image whitespace", func(p *v1.Pod) { p.Spec.Containers[0].Image = " busybox" }, "spec.containers[0].image: Invalid value"},
		{"pull policy", func(p *v1.Pod) { p.Spec.Containers[0].ImagePullPolicy = "Sometimes" }, "spec.containers[0].imagePullPolicy: Unsupported value"},
		{"termination message policy", func(p *v1.Pod) { p.Spec.Containers[0].TerminationMessagePolicy = "X" }, "spec.containers[0].terminationMessagePolicy: Unsupported value"},
		{"restartPolicy", func(p *v1.Pod) { p.Spec.RestartPolicy = "Sometimes" }, "spec.restartPolicy: Unsupported value"},
		{"restartPolicy required", func(p *v1.Pod) { p.Spec.RestartPolicy = "" }, "spec.restartPolicy: Required value"},
		{"dnsPolicy", func(p *v1.Pod) { p.Spec.DNSPolicy = "Mine" }, "spec.dnsPolicy: Unsupported value"},
		{"dnsPolicy None needs nameservers", func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSNone }, "spec.dnsConfig.nameservers: Required value"},
		{"negative grace", func(p *v1.Pod) { g := int64(-1); p.Spec.TerminationGracePeriodSeconds = &g }, "spec.terminationGracePeriodSeconds: Invalid value"},
		{"zero deadline", func(p *v1.Pod) { d := int64(0); p.Spec.ActiveDeadlineSeconds = &d }, "spec.activeDeadlineSeconds: Invalid value"},
		{"hostname", func(p *v1.Pod) { p.Spec.Hostname = "a.b" }, "spec.hostname: Invalid value"},
		{"volume name", func(p *v1.Pod) { p.Spec.Volumes[0].Name = "Data" }, "spec.volumes[0].name: Invalid value"},
		{"duplicate volume", func(p *v1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, p.Spec.Volumes[0]) }, "spec.volumes[1].name: Duplicate value"},
		{"volume without source", func(p *v1.Pod) { p.Spec.Volumes[0].EmptyDir = nil }, "spec.volumes[0]: Required value"},
		{"volume with two sources", func(p *v1.Pod) { p.Spec.Volumes[0].HostPath = &v1.HostPathVolumeSource{Path: "/x"} }, "spec.volumes[0]: Forbidden"},
		{"hostPath type", func(p *v1.Pod) {
			ty := v1.HostPathType("Pipe")
			p.Spec.Volumes[0] = v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/x", Type: &ty}}}
		}, "spec.volumes[0].hostPath.type: Unsupported value"},
		{"hostPath path", func(p *v1.Pod) {
			p.Spec.Volumes[0] = v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{}}}
		}, "spec.volumes[0].hostPath.path: Required value"},
		{"emptyDir medium", func(p *v1.Pod) { p.Spec.Volumes[0].EmptyDir.Medium = "Disk" }, "spec.volumes[0].emptyDir.medium: Unsupported value"},
		{"mount of a missing volume", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[0].Name = "other" }, "spec.containers[0].volumeMounts[0].name: Not found"},
		{"mount path required", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[0].MountPath = "" }, "spec.containers[0].volumeMounts[0].mountPath: Required value"},
		{"container port", func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 70000, Protocol: v1.ProtocolTCP}}
		}, "spec.containers[0].ports[0].containerPort: Invalid value"},
		{"port protocol", func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, Protocol: "ICMP"}}
		}, "spec.containers[0].ports[0].protocol: Unsupported value"},
		{"duplicate port name", func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: v1.ProtocolTCP}, {Name: "http", ContainerPort: 81, Protocol: v1.ProtocolTCP}}
		}, "spec.containers[0].ports[1].name: Duplicate value"},
		{"hostNetwork port mismatch", func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP}}
		}, "spec.containers[0].ports[0].containerPort: Invalid value"},
		{"env name", func(p *v1.Pod) { p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A=B"}} }, "spec.containers[0].env[0].name: Invalid value"},
		{"probe without handler", func(p *v1.Pod) { p.Spec.Containers[0].ReadinessProbe = &v1.Probe{} }, "spec.containers[0].readinessProbe: Required value"},
		{"preStop with two handlers", func(p *v1.Pod) {
			p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{
				Exec: &v1.ExecAction{Command: []string{"true"}}, Sleep: &v1.SleepAction{Seconds: 1}}}
		}, "spec.containers[0].lifecycle.preStop: Forbidden"},
		{"requests above limits", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{
				Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}, Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}}
		}, "spec.containers[0].resources.requests[cpu]: Invalid value"},
		{"init container restartPolicy", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{initContainer("Sometimes")}
		}, "spec.initContainers[0].restartPolicy: Unsupported value"},
		{"init container restartPolicy Never with a rule", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{initContainer(v1.ContainerRestartPolicyNever, restartRuleIn(v1.ContainerRestartRuleActionRestart, 42))}
		}, ""},
		{"sidecar with rules (RestartAllContainers on)", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{initContainer(v1.ContainerRestartPolicyAlways, restartRuleIn(v1.ContainerRestartRuleActionRestart, 42))}
		}, ""},
		{"container restartPolicy OnFailure", func(p *v1.Pod) { p.Spec.Containers[0].RestartPolicy = ptrTo(v1.ContainerRestartPolicyOnFailure) }, ""},
		{"container restartPolicy unknown", func(p *v1.Pod) { p.Spec.Containers[0].RestartPolicy = ptrTo(v1.ContainerRestartPolicy("Sometimes")) },
			"spec.containers[0].restartPolicy: Unsupported value"},
		{"container rules without a restartPolicy", func(p *v1.Pod) {
			p.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{restartRuleIn(v1.ContainerRestartRuleActionRestart, 1)}
		}, "spec.containers[0].restartPolicy: Required value"},
		{"container rule with RestartAllContainers", func(p *v1.Pod) {
			p.Spec.Containers[0].RestartPolicy = ptrTo(v1.ContainerRestartPolicyNever)
			p.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{restartRuleIn(v1.ContainerRestartRuleActionRestartAllContainers, 1)}
		}, ""},
		{"container rule with an unknown action", func(p *v1.Pod) {
			p.Spec.Containers[0].RestartPolicy = ptrTo(v1.ContainerRestartPolicyNever)
			p.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{restartRuleIn("Reboot", 1)}
		}, `spec.containers[0].restartPolicyRules[0].action: Unsupported value: "Reboot": supported values: "Restart", "RestartAllContainers"`},
		{"container rule without exit codes", func(p *v1.Pod) {
			p.Spec.Containers[0].RestartPolicy = ptrTo(v1.ContainerRestartPolicyNever)
			p.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart}}
		}, "spec.containers[0].restartPolicyRules[0].exitCodes: Required value"},
		{"container rule operator", func(p *v1.Pod) {
			rule := restartRuleIn(v1.ContainerRestartRuleActionRestart, 1)
			rule.ExitCodes.Operator = "Between"
			p.Spec.Containers[0].RestartPolicy = ptrTo(v1.ContainerRestartPolicyNever)
			p.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{rule}
		}, "spec.containers[0].restartPolicyRules[0].exitCodes.operator: Unsupported value"},
		{"too many container rules", func(p *v1.Pod) {
			p.Spec.Containers[0].RestartPolicy = ptrTo(v1.ContainerRestartPolicyNever)
			for range 21 {
				p.Spec.Containers[0].RestartPolicyRules = append(p.Spec.Containers[0].RestartPolicyRules, restartRuleIn(v1.ContainerRestartRuleActionRestart, 1))
			}
		}, "spec.containers[0].restartPolicyRules: Too many"},
		{"too many exit codes", func(p *v1.Pod) {
			p.Spec.Containers[0].RestartPolicy = ptrTo(v1.ContainerRestartPolicyNever)
			p.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{restartRuleIn(v1.ContainerRestartRuleActionRestart, make([]int32, 256)...)}
		}, "spec.containers[0].restartPolicyRules[0].exitCodes.values: Too many"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := validPod()
			tc.edit(pod)
			err := Validate(pod, Options{})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("Validate succeeded, want %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

// TestValidateRestartAllContainersOff: with its gate off the
// RestartAllContainers action is refused, and a sidecar takes no rules, as
// the API server does.
func TestValidateRestartAllContainersOff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc    string
		edit    func(*v1.Pod)
		wantErr string
	}{
		{"container rule with RestartAllContainers", func(p *v1.Pod) {
			p.Spec.Containers[0].RestartPolicy = ptrTo(v1.ContainerRestartPolicyNever)
			p.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{restartRuleIn(v1.ContainerRestartRuleActionRestartAllContainers, 1)}
		}, `spec.containers[0].restartPolicyRules[0].action: Unsupported value: "RestartAllContainers": supported values: "Restart"`},
		{"init container rule with RestartAllContainers", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{initContainer(v1.ContainerRestartPolicyNever, restartRuleIn(v1.ContainerRestartRuleActionRestartAllContainers, 42))}
		}, "spec.initContainers[0].restartPolicyRules[0].action: Unsupported value"},
		{"sidecar with rules", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{initContainer(v1.ContainerRestartPolicyAlways, restartRuleIn(v1.ContainerRestartRuleActionRestart, 42))}
		}, "spec.initContainers[0].restartPolicyRules: Forbidden"},
		{"container rule with Restart", func(p *v1.Pod) {
			p.Spec.Containers[0].RestartPolicy = ptrTo(v1.ContainerRestartPolicyNever)
			p.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{restartRuleIn(v1.ContainerRestartRuleActionRestart, 1)}
		}, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := validPod()
			tc.edit(pod)
			err := Validate(pod, Options{RefuseRestartAllContainers: true})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("Validate succeeded, want %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestCheckAPIReferences(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc    string
		edit    func(p *v1.Pod)
		wantErr string
	}{
		{"none", func(*v1.Pod) {}, ""},
		{"hostPath and downwardAPI are fine", func(p *v1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes,
				v1.Volume{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/x"}}},
				v1.Volume{Name: "p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
					Sources: []v1.VolumeProjection{{DownwardAPI: &v1.DownwardAPIProjection{}}}}}})
		}, ""},
		{"service account", func(p *v1.Pod) { p.Spec.ServiceAccountName = "sa" }, "spec.serviceAccountName: Forbidden"},
		{"image pull secret", func(p *v1.Pod) { p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "s"}} }, "spec.imagePullSecrets: Forbidden"},
		{"env secret", func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A"}, {Name: "B", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{Key: "k"}}}}
		}, "spec.containers[0].env[1].valueFrom.secretKeyRef: Forbidden"},
		{"envFrom configmap", func(p *v1.Pod) {
			p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{}}}
		}, "spec.containers[0].envFrom[0].configMapRef: Forbidden"},
		{"configMap volume", func(p *v1.Pod) {
			p.Spec.Volumes[0].VolumeSource = v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}
		}, "spec.volumes[0]: Forbidden: static pods may not reference configmaps"},
		{"projected token", func(p *v1.Pod) {
			p.Spec.Volumes[0].VolumeSource = v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
				Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "t"}}}}}
		}, "spec.volumes[0]: Forbidden: static pods may not reference serviceaccounts"},
		{"PVC", func(p *v1.Pod) {
			p.Spec.Volumes[0].VolumeSource = v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}
		}, "persistentvolumeclaims"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := validPod()
			tc.edit(pod)
			err := checkAPIReferences(pod)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("checkAPIReferences: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}
