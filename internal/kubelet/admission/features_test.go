package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestDeclaredFeatures(t *testing.T) {
	t.Parallel()
	rule := func(action v1.ContainerRestartRuleAction) []v1.ContainerRestartRule {
		return []v1.ContainerRestartRule{{Action: action,
			ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{3}}}}
	}
	for _, tc := range []struct {
		desc   string
		mutate func(*v1.Pod)
		want   bool
	}{
		{desc: "no restart rules", want: true},
		{desc: "a Restart rule", mutate: func(p *v1.Pod) { p.Spec.Containers[0].RestartPolicyRules = rule(v1.ContainerRestartRuleActionRestart) }, want: true},
		{desc: "a RestartAllContainers rule", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].RestartPolicyRules = rule(v1.ContainerRestartRuleActionRestartAllContainers)
		}},
		{desc: "a RestartAllContainers rule on an init container", mutate: func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i", RestartPolicyRules: rule(v1.ContainerRestartRuleActionRestartAllContainers)}}
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			reason, message, ok := DeclaredFeatures(admissionPod("p", tc.mutate))
			if ok != tc.want {
				t.Fatalf("DeclaredFeatures = %q %q %v, want admitted %v", reason, message, ok, tc.want)
			}
			if !ok && (reason != "PodFeatureUnsupported" || message != "Pod requires node features that are not available: RestartAllContainersOnContainerExits") {
				t.Errorf("rejection %q %q, want upstream's", reason, message)
			}
		})
	}
}
