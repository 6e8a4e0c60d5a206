package nodefeatures

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// defaults are the gates of upstream 1.37.1 the registry's features read,
// at their defaults.
var defaults = map[string]bool{
	"InPlacePodLevelResourcesVerticalScaling":      true,
	"InPlacePodVerticalScalingInitContainers":      true,
	"ExtendWebSocketsToKubelet":                    true,
	"RestartAllContainersOnContainerExits":         true,
	"InPlacePodVerticalScalingMemoryBackedVolumes": false,
}

func discover(t *testing.T, over map[string]bool) *Declared {
	t.Helper()
	gates := map[string]bool{}
	for k, v := range defaults {
		gates[k] = v
	}
	for k, v := range over {
		gates[k] = v
	}
	d, err := Discover(func(g string) bool { return gates[g] }, "v1.37.1")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The declared features are the implemented ones whose gates are on, sorted;
// a feature this kubelet does not carry out is never declared.
func TestDiscover(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc  string
		gates map[string]bool
		want  []string
	}{
		{desc: "defaults", want: []string{"ExtendWebSocketsToKubelet", "InPlacePodLevelResourcesVerticalScaling",
			"InPlacePodVerticalScalingInitContainers", "RestartAllContainersOnContainerExits"}},
		{desc: "pod-level resize off", gates: map[string]bool{"InPlacePodLevelResourcesVerticalScaling": false},
			want: []string{"ExtendWebSocketsToKubelet", "InPlacePodVerticalScalingInitContainers", "RestartAllContainersOnContainerExits"}},
		{desc: "RestartAllContainers off", gates: map[string]bool{"RestartAllContainersOnContainerExits": false},
			want: []string{"ExtendWebSocketsToKubelet", "InPlacePodLevelResourcesVerticalScaling", "InPlacePodVerticalScalingInitContainers"}},
		{desc: "unimplemented features on", gates: map[string]bool{"InPlacePodVerticalScalingMemoryBackedVolumes": true, "DRAOptionalNodeOperations": true},
			want: []string{"ExtendWebSocketsToKubelet", "InPlacePodLevelResourcesVerticalScaling",
				"InPlacePodVerticalScalingInitContainers", "RestartAllContainersOnContainerExits"}},
		{desc: "everything off", gates: map[string]bool{"InPlacePodLevelResourcesVerticalScaling": false,
			"InPlacePodVerticalScalingInitContainers": false, "ExtendWebSocketsToKubelet": false,
			"RestartAllContainersOnContainerExits": false}, want: []string{}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := discover(t, tc.gates).Names(); !slices.Equal(got, tc.want) || got == nil {
				t.Errorf("Names = %#v, want %#v", got, tc.want)
			}
		})
	}
	if _, err := Discover(func(string) bool { return true }, "not a version"); err == nil {
		t.Error("a bad kubelet version was accepted")
	}
}

func restartAllPod() *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", RestartPolicyRules: []v1.ContainerRestartRule{{
		Action:    v1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{3}},
	}}}}}}
}

// A pod that needs an undeclared feature to run is rejected with upstream's
// reason and message; others are admitted.
func TestAdmit(t *testing.T) {
	t.Parallel()
	d := discover(t, nil)
	if reason, message, ok := d.Admit(&v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}); !ok {
		t.Errorf("a plain pod was rejected: %s %s", reason, message)
	}
	if reason, message, ok := d.Admit(restartAllPod()); !ok {
		t.Errorf("a RestartAllContainers pod was rejected with the feature declared: %s %s", reason, message)
	}
	d = discover(t, map[string]bool{"RestartAllContainersOnContainerExits": false})
	reason, message, ok := d.Admit(restartAllPod())
	if ok || reason != "PodFeatureUnsupported" || message != "Pod requires node features that are not available: RestartAllContainersOnContainerExits" {
		t.Errorf("RestartAllContainers pod: %q %q %v, want upstream's rejection", reason, message, ok)
	}
}

// A resize of the pod-level resources or of a non-sidecar init container
// needs its feature; with the feature declared nothing is missing.
func TestMissingForUpdate(t *testing.T) {
	t.Parallel()
	pod := &v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "i"}}, Containers: []v1.Container{{Name: "c"}}}}
	podLevel := pod.DeepCopy()
	podLevel.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}
	initResize := pod.DeepCopy()
	initResize.Spec.InitContainers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
	off := discover(t, map[string]bool{"InPlacePodLevelResourcesVerticalScaling": false, "InPlacePodVerticalScalingInitContainers": false})
	on := discover(t, nil)
	for _, tc := range []struct {
		desc     string
		d        *Declared
		cur      *v1.Pod
		wantMiss []string
	}{
		{desc: "pod-level resize, declared", d: on, cur: podLevel},
		{desc: "pod-level resize, not declared", d: off, cur: podLevel, wantMiss: []string{"InPlacePodLevelResourcesVerticalScaling"}},
		{desc: "init container resize, not declared", d: off, cur: initResize, wantMiss: []string{"InPlacePodVerticalScalingInitContainers"}},
		{desc: "no change", d: off, cur: pod},
	} {
		got, err := tc.d.MissingForUpdate(pod, tc.cur)
		if err != nil || !slices.Equal(got, tc.wantMiss) {
			t.Errorf("%s: MissingForUpdate = %v, %v; want %v", tc.desc, got, err, tc.wantMiss)
		}
	}
}
