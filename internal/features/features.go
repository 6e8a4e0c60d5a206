// Package features is the kubelet's feature gate set: every gate the upstream
// kubelet v1.37.1 accepts (upstream.go, generated from that kubelet by
// scripts/controlplane/featuregates), with its default, stage and lock, in a
// k8s.io/component-base feature gate, so that --feature-gates and the
// featureGates config field are accepted, refused (unknown gates, locked
// ones) and reported exactly as upstream's kubelet does.
//
// Most gates change behaviour this kubelet does not implement; NoEffect names
// those a setting turns away from their default, so that the kubelet says so
// at start instead of silently ignoring them.
//
// It is a leaf: it imports nothing from this module.
package features

import (
	"fmt"
	"sort"

	"k8s.io/component-base/featuregate"
)

// Gates this kubelet reads.
const (
	// HugepageAwareEviction takes the huge pages off memory.available.
	HugepageAwareEviction featuregate.Feature = "HugepageAwareEviction"
	// KubeletCrashLoopBackOffMax lets crashLoopBackOff.maxContainerRestartPeriod
	// set the container restart back-off's maximum.
	KubeletCrashLoopBackOffMax featuregate.Feature = "KubeletCrashLoopBackOffMax"
	// ReduceDefaultCrashLoopBackOffDecay makes the restart back-off start at
	// 1s and stop at 60s.
	ReduceDefaultCrashLoopBackOffDecay featuregate.Feature = "ReduceDefaultCrashLoopBackOffDecay"
	// KubeletInUserNamespace lets a kubelet in a user namespace start though
	// it cannot set the kernel tunables.
	KubeletInUserNamespace featuregate.Feature = "KubeletInUserNamespace"
	// EventedPLEG refreshes pods from the runtime's container events, with
	// the relist every 300s as a safety net.
	EventedPLEG featuregate.Feature = "EventedPLEG"
	// ContainerRestartRules lets a regular (or regular init) container's own
	// restartPolicy and restartPolicyRules override the pod's restartPolicy.
	ContainerRestartRules featuregate.Feature = "ContainerRestartRules"
	// RestartAllContainersOnContainerExits adds the RestartAllContainers
	// action of restart rules (the pod's containers all restart in place),
	// declared in the node's status.declaredFeatures.
	RestartAllContainersOnContainerExits featuregate.Feature = "RestartAllContainersOnContainerExits"
	// InPlacePodLevelResourcesVerticalScaling lets a resize change the
	// pod-level resources (spec.resources), has the pod status report the
	// pod's own allocatedResources and resources, and is declared in the
	// node's status.declaredFeatures.
	InPlacePodLevelResourcesVerticalScaling featuregate.Feature = "InPlacePodLevelResourcesVerticalScaling"
	// ExtendWebSocketsToKubelet is declared in the node's
	// status.declaredFeatures: the API server then proxies exec, attach and
	// port-forward WebSockets to the kubelet, which serves them.
	ExtendWebSocketsToKubelet featuregate.Feature = "ExtendWebSocketsToKubelet"
	// MemoryQoS gives containers on cgroup v2 memory.min and memory.low 0
	// and a memory.high throttle below their limit (memoryThrottlingFactor).
	MemoryQoS featuregate.Feature = "MemoryQoS"
	// PodCertificateRequest lets podCertificate projected volume sources get
	// their certificates through PodCertificateRequests.
	PodCertificateRequest featuregate.Feature = "PodCertificateRequest"
	// KubeletServiceAccountTokenForCredentialProviders sends credential
	// provider plugins with tokenAttributes the pod's service account token;
	// off, such a provider config is refused.
	KubeletServiceAccountTokenForCredentialProviders featuregate.Feature = "KubeletServiceAccountTokenForCredentialProviders"
	// KubeletEnsureSecretPulledImages keeps records of the credentials each
	// image was pulled with, and has a pod show matching credentials before
	// it may use an image another pod's credentials pulled
	// (imagePullCredentialsVerificationPolicy).
	KubeletEnsureSecretPulledImages featuregate.Feature = "KubeletEnsureSecretPulledImages"
	// DefaultPodSysctls gives every sandbox the node's defaultPodSysctls
	// (alpha, off by default).
	DefaultPodSysctls featuregate.Feature = "DefaultPodSysctls"
)

// honoured are the gates whose setting this kubelet acts on.
var honoured = map[featuregate.Feature]bool{
	HugepageAwareEviction:                true,
	KubeletCrashLoopBackOffMax:           true,
	ReduceDefaultCrashLoopBackOffDecay:   true,
	KubeletInUserNamespace:               true,
	EventedPLEG:                          true,
	ContainerRestartRules:                true,
	RestartAllContainersOnContainerExits: true,

	InPlacePodLevelResourcesVerticalScaling: true,
	ExtendWebSocketsToKubelet:               true,
	MemoryQoS:                               true,
	PodCertificateRequest:                   true,

	KubeletServiceAccountTokenForCredentialProviders: true,
	KubeletEnsureSecretPulledImages:                  true,
	DefaultPodSysctls:                                true,
}

// New returns a feature gate set with every upstream kubelet gate at its
// default.
func New() (featuregate.MutableFeatureGate, error) {
	fg := featuregate.NewFeatureGate()
	if err := fg.Add(upstreamGates); err != nil {
		return nil, fmt.Errorf("feature gates: %w", err)
	}
	return fg, nil
}

// Known reports whether name is a gate of upstream's kubelet.
func Known(name string) bool {
	_, ok := upstreamGates[featuregate.Feature(name)]
	return ok
}

// NoEffect lists, sorted as "Name=value", the gates settings sets to a value
// other than the default that this kubelet does not act on; AllAlpha=true
// and AllBeta=true are named too (they turn on many such gates).
func NoEffect(settings map[string]bool) []string {
	var out []string
	for name, value := range settings {
		spec, ok := upstreamGates[featuregate.Feature(name)]
		if !ok || spec.Default == value || honoured[featuregate.Feature(name)] {
			continue
		}
		out = append(out, fmt.Sprintf("%s=%v", name, value))
	}
	for _, all := range []string{"AllAlpha", "AllBeta"} {
		if settings[all] {
			out = append(out, all+"=true")
		}
	}
	sort.Strings(out)
	return out
}
