package manifest

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks the subset of the API server's pod validation the kubelet depends on:
// metadata (name a DNS subdomain, namespace a DNS label, labels, annotations), volumes
// (DNS label names, unique, exactly one source), containers (at least one, unique DNS
// label names across init and regular containers, images set, pull and termination
// message policies, ports, env names, volume mounts that reference volumes, probes and
// lifecycle handlers with exactly one action, requests not above limits, the
// containers' own restartPolicy and restartPolicyRules) and the pod
// fields restartPolicy, dnsPolicy, terminationGracePeriodSeconds, activeDeadlineSeconds,
// hostname and subdomain. Defaulted fields are required, so call SetDefaults first. The
// error lists every problem, each prefixed by its field path (e.g.
// "spec.containers[0].image: Required value").
//
// With opts.RefuseRestartAllContainers (its gate off) a restart rule with the
// RestartAllContainers action is refused, as the API server refuses it.
func Validate(pod *v1.Pod, opts Options) error {
	errs := validateMeta(&pod.ObjectMeta, field.NewPath("metadata"))
	errs = append(errs, validateSpec(&pod.Spec, field.NewPath("spec"), opts)...)
	return errs.ToAggregate()
}

func validateMeta(meta *metav1.ObjectMeta, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateName(meta.Name, path.Child("name"), validation.IsDNS1123Subdomain)...)
	errs = append(errs, validateName(meta.Namespace, path.Child("namespace"), validation.IsDNS1123Label)...)
	errs = append(errs, metav1validation.ValidateLabels(meta.Labels, path.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(meta.Annotations, path.Child("annotations"))...)
	return errs
}

func validateName(name string, path *field.Path, check func(string) []string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	for _, msg := range check(name) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

func validateSpec(spec *v1.PodSpec, path *field.Path, opts Options) field.ErrorList {
	volumes, errs := validateVolumes(spec.Volumes, path.Child("volumes"))
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(path.Child("containers"), "a pod needs at least one container"))
	}
	names := sets.New[string]()
	ctx := containerContext{volumes: volumes, names: names, hostNetwork: spec.HostNetwork}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		p := path.Child("initContainers").Index(i)
		errs = append(errs, ctx.validate(c, p)...)
		errs = append(errs, validateInitRestartPolicy(c, p, opts)...)
	}
	for i := range spec.Containers {
		c, p := &spec.Containers[i], path.Child("containers").Index(i)
		errs = append(errs, ctx.validate(c, p)...)
		errs = append(errs, validateRestartPolicy(c.RestartPolicy, c.RestartPolicyRules, p, opts)...)
	}
	errs = append(errs, validatePodFields(spec, path)...)
	return errs
}

// Limits of a container's restart rules (the API server's).
const (
	maxRestartRules     = 20
	maxRestartExitCodes = 255
)

// validateInitRestartPolicy checks an init container's restartPolicy and
// restart rules as the API server does with ContainerRestartRules on: a
// regular init container may have its own policy and rules; a sidecar
// (Always) may have rules only with RestartAllContainers allowed (its gate
// on), and takes none otherwise.
func validateInitRestartPolicy(c *v1.Container, path *field.Path, opts Options) field.ErrorList {
	switch {
	case c.RestartPolicy == nil && len(c.RestartPolicyRules) > 0:
		return field.ErrorList{field.Required(path.Child("restartPolicy"), "must specify restartPolicy when restart rules are used")}
	case c.RestartPolicy == nil:
		return nil
	case *c.RestartPolicy == v1.ContainerRestartPolicyAlways && len(c.RestartPolicyRules) > 0 && opts.RefuseRestartAllContainers:
		return field.ErrorList{field.Forbidden(path.Child("restartPolicyRules"),
			"restartPolicyRules are not allowed for init containers with restart policy Always")}
	}
	return validateRestartPolicy(c.RestartPolicy, c.RestartPolicyRules, path, opts)
}

// validateRestartPolicy checks a container's own restartPolicy and restart
// rules: a known policy (required with rules), at most 20 rules, each with the
// action Restart (or RestartAllContainers, unless
// opts.RefuseRestartAllContainers) and exit codes (In or NotIn, at most 255
// values).
func validateRestartPolicy(policy *v1.ContainerRestartPolicy, rules []v1.ContainerRestartRule, path *field.Path, opts Options) field.ErrorList {
	var errs field.ErrorList
	policies := []string{string(v1.ContainerRestartPolicyAlways), string(v1.ContainerRestartPolicyNever), string(v1.ContainerRestartPolicyOnFailure)}
	switch {
	case policy == nil && len(rules) > 0:
		errs = append(errs, field.Required(path.Child("restartPolicy"), "must specify restartPolicy when restart rules are used"))
	case policy != nil && !slices.Contains(policies, string(*policy)):
		errs = append(errs, field.NotSupported(path.Child("restartPolicy"), *policy, policies))
	}
	if len(rules) > maxRestartRules {
		errs = append(errs, field.TooMany(path.Child("restartPolicyRules"), len(rules), maxRestartRules))
	}
	actions := []string{string(v1.ContainerRestartRuleActionRestart), string(v1.ContainerRestartRuleActionRestartAllContainers)}
	if opts.RefuseRestartAllContainers {
		actions = actions[:1]
	}
	for i, rule := range rules {
		p := path.Child("restartPolicyRules").Index(i)
		if !slices.Contains(actions, string(rule.Action)) {
			errs = append(errs, field.NotSupported(p.Child("action"), rule.Action, actions))
		}
		if rule.ExitCodes == nil {
			errs = append(errs, field.Required(p.Child("exitCodes"), "must be specified"))
			continue
		}
		switch rule.ExitCodes.Operator {
		case v1.ContainerRestartRuleOnExitCodesOpIn, v1.ContainerRestartRuleOnExitCodesOpNotIn:
		default:
			errs = append(errs, field.NotSupported(p.Child("exitCodes", "operator"), rule.ExitCodes.Operator,
				[]string{string(v1.ContainerRestartRuleOnExitCodesOpIn), string(v1.ContainerRestartRuleOnExitCodesOpNotIn)}))
		}
		if n := len(rule.ExitCodes.Values); n > maxRestartExitCodes {
			errs = append(errs, field.TooMany(p.Child("exitCodes", "values"), n, maxRestartExitCodes))
		}
	}
	return errs
}

func validatePodFields(spec *v1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateEnum(path.Child("restartPolicy"), string(spec.RestartPolicy),
		string(v1.RestartPolicyAlways), string(v1.RestartPolicyOnFailure), string(v1.RestartPolicyNever))...)
	errs = append(errs, validateEnum(path.Child("dnsPolicy"), string(spec.DNSPolicy),
		string(v1.DNSClusterFirst), string(v1.DNSClusterFirstWithHostNet), string(v1.DNSDefault), string(v1.DNSNone))...)
	if spec.DNSPolicy == v1.DNSNone && (spec.DNSConfig == nil || len(spec.DNSConfig.Nameservers) == 0) {
		errs = append(errs, field.Required(path.Child("dnsConfig", "nameservers"), "dnsPolicy None needs at least one nameserver"))
	}
	if g := spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(path.Child("terminationGracePeriodSeconds"), *g, "must be non-negative"))
	}
	if d := spec.ActiveDeadlineSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(path.Child("activeDeadlineSeconds"), *d, "must be positive"))
	}
	if spec.Hostname != "" {
		errs = append(errs, validateName(spec.Hostname, path.Child("hostname"), validation.IsDNS1123Label)...)
	}
	if spec.Subdomain != "" {
		errs = append(errs, validateName(spec.Subdomain, path.Child("subdomain"), validation.IsDNS1123Label)...)
	}
	return errs
}

func validateEnum(path *field.Path, value string, allowed ...string) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	for _, a := range allowed {
		if value == a {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(path, value, allowed)}
}

// validateVolumes returns the set of volume names and the errors.
func validateVolumes(volumes []v1.Volume, path *field.Path) (sets.Set[string], field.ErrorList) {
	names := sets.New[string]()
	var errs field.ErrorList
	for i := range volumes {
		vol := &volumes[i]
		p := path.Index(i)
		errs = append(errs, validateName(vol.Name, p.Child("name"), validation.IsDNS1123Label)...)
		if names.Has(vol.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), vol.Name))
		}
		names.Insert(vol.Name)
		switch n := countSources(&vol.VolumeSource); {
		case n == 0:
			errs = append(errs, field.Required(p, "must specify a volume type"))
		case n > 1:
			errs = append(errs, field.Forbidden(p, "may not specify more than 1 volume type"))
		}
		errs = append(errs, validateVolumeSource(&vol.VolumeSource, p)...)
	}
	return names, errs
}

// countSources counts the set sources; every VolumeSource field is a pointer.
func countSources(src *v1.VolumeSource) int {
	n := 0
	v := reflect.ValueOf(src).Elem()
	for i := 0; i < v.NumField(); i++ {
		if !v.Field(i).IsNil() {
			n++
		}
	}
	return n
}

func validateVolumeSource(src *v1.VolumeSource, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if hp := src.HostPath; hp != nil {
		p := path.Child("hostPath")
		if hp.Path == "" {
			errs = append(errs, field.Required(p.Child("path"), ""))
		}
		if hp.Type != nil {
			errs = append(errs, validateEnumAllowEmpty(p.Child("type"), string(*hp.Type),
				v1.HostPathDirectoryOrCreate, v1.HostPathDirectory, v1.HostPathFileOrCreate, v1.HostPathFile,
				v1.HostPathSocket, v1.HostPathCharDev, v1.HostPathBlockDev)...)
		}
	}
	if ed := src.EmptyDir; ed != nil {
		m := ed.Medium
		if m != v1.StorageMediumDefault && m != v1.StorageMediumMemory && !strings.HasPrefix(string(m), string(v1.StorageMediumHugePages)) {
			errs = append(errs, field.NotSupported(path.Child("emptyDir", "medium"), m,
				[]string{"", string(v1.StorageMediumMemory), string(v1.StorageMediumHugePages)}))
		}
		if ed.SizeLimit != nil && ed.SizeLimit.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Child("emptyDir", "sizeLimit"), ed.SizeLimit.String(), "must be non-negative"))
		}
	}
	return errs
}

func validateEnumAllowEmpty[T ~string](path *field.Path, value string, allowed ...T) field.ErrorList {
	if value == "" {
		return nil
	}
	strs := make([]string, 0, len(allowed))
	for _, a := range allowed {
		if value == string(a) {
			return nil
		}
		strs = append(strs, string(a))
	}
	return field.ErrorList{field.NotSupported(path, value, strs)}
}

// containerContext carries what container validation needs from the pod.
type containerContext struct {
	volumes     sets.Set[string]
	names       sets.Set[string] // container names seen so far (init and regular)
	hostNetwork bool
}

func (cc containerContext) validate(c *v1.Container, path *field.Path) field.ErrorList {
	errs := validateName(c.Name, path.Child("name"), validation.IsDNS1123Label)
	if c.Name != "" && cc.names.Has(c.Name) {
		errs = append(errs, field.Duplicate(path.Child("name"), c.Name))
	}
	cc.names.Insert(c.Name)
	if c.Image == "" {
		errs = append(errs, field.Required(path.Child("image"), ""))
	} else if strings.TrimSpace(c.Image) != c.Image {
		errs = append(errs, field.Invalid(path.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	errs = append(errs, validateEnum(path.Child("imagePullPolicy"), string(c.ImagePullPolicy),
		string(v1.PullAlways), string(v1.PullIfNotPresent), string(v1.PullNever))...)
	errs = append(errs, validateEnum(path.Child("terminationMessagePolicy"), string(c.TerminationMessagePolicy),
		string(v1.TerminationMessageReadFile), string(v1.TerminationMessageFallbackToLogsOnError))...)
	errs = append(errs, cc.validatePorts(c.Ports, path.Child("ports"))...)
	errs = append(errs, validateEnv(c.Env, path.Child("env"))...)
	errs = append(errs, cc.validateMounts(c.VolumeMounts, path.Child("volumeMounts"))...)
	errs = append(errs, validateProbe(c.LivenessProbe, path.Child("livenessProbe"))...)
	errs = append(errs, validateProbe(c.ReadinessProbe, path.Child("readinessProbe"))...)
	errs = append(errs, validateProbe(c.StartupProbe, path.Child("startupProbe"))...)
	if c.Lifecycle != nil {
		errs = append(errs, validateHandler(c.Lifecycle.PostStart, path.Child("lifecycle", "postStart"))...)
		errs = append(errs, validateHandler(c.Lifecycle.PreStop, path.Child("lifecycle", "preStop"))...)
	}
	errs = append(errs, validateResources(&c.Resources, path.Child("resources"))...)
	return errs
}

func (cc containerContext) validatePorts(ports []v1.ContainerPort, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		p := path.Index(i)
		if port.Name != "" {
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), port.Name, msg))
			}
			if names.Has(port.Name) {
				errs = append(errs, field.Duplicate(p.Child("name"), port.Name))
			}
			names.Insert(port.Name)
		}
		for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
			errs = append(errs, field.Invalid(p.Child("containerPort"), port.ContainerPort, msg))
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(p.Child("hostPort"), port.HostPort, msg))
			}
		}
		if cc.hostNetwork && port.HostPort != port.ContainerPort {
			errs = append(errs, field.Invalid(p.Child("containerPort"), port.ContainerPort,
				"must match hostPort when hostNetwork is true"))
		}
		errs = append(errs, validateEnum(p.Child("protocol"), string(port.Protocol),
			string(v1.ProtocolTCP), string(v1.ProtocolUDP), string(v1.ProtocolSCTP))...)
	}
	return errs
}

func validateEnv(env []v1.EnvVar, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, e := range env {
		p := path.Index(i).Child("name")
		if e.Name == "" {
			errs = append(errs, field.Required(p, ""))
			continue
		}
		for _, msg := range validation.IsRelaxedEnvVarName(e.Name) {
			errs = append(errs, field.Invalid(p, e.Name, msg))
		}
	}
	return errs
}

func (cc containerContext) validateMounts(mounts []v1.VolumeMount, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	paths := sets.New[string]()
	for i, m := range mounts {
		p := path.Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		} else if !cc.volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(p.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(p.Child("mountPath"), ""))
		} else if paths.Has(m.MountPath) {
			errs = append(errs, field.Invalid(p.Child("mountPath"), m.MountPath, "must be unique"))
		}
		paths.Insert(m.MountPath)
	}
	return errs
}

func validateProbe(probe *v1.Probe, path *field.Path) field.ErrorList {
	if probe == nil {
		return nil
	}
	h := probe.ProbeHandler
	errs := validateActionCount(path, h.Exec != nil, h.HTTPGet != nil, h.TCPSocket != nil, h.GRPC != nil)
	for _, f := range []struct {
		name  string
		value int32
	}{
		{"initialDelaySeconds", probe.InitialDelaySeconds}, {"timeoutSeconds", probe.TimeoutSeconds},
		{"periodSeconds", probe.PeriodSeconds}, {"successThreshold", probe.SuccessThreshold},
		{"failureThreshold", probe.FailureThreshold},
	} {
		if f.value < 0 {
			errs = append(errs, field.Invalid(path.Child(f.name), f.value, "must be non-negative"))
		}
	}
	return errs
}

func validateHandler(h *v1.LifecycleHandler, path *field.Path) field.ErrorList {
	if h == nil {
		return nil
	}
	return validateActionCount(path, h.Exec != nil, h.HTTPGet != nil, h.TCPSocket != nil, h.Sleep != nil)
}

func validateActionCount(path *field.Path, set ...bool) field.ErrorList {
	n := 0
	for _, s := range set {
		if s {
			n++
		}
	}
	switch {
	case n == 0:
		return field.ErrorList{field.Required(path, "must specify a handler type")}
	case n > 1:
		return field.ErrorList{field.Forbidden(path, "may not specify more than 1 handler type")}
	}
	return nil
}

func validateResources(r *v1.ResourceRequirements, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
		req := r.Requests[name]
		if req.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Child("requests").Key(string(name)), req.String(), "must be non-negative"))
		}
		limit, ok := r.Limits[name]
		if ok && req.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(path.Child("requests").Key(string(name)), req.String(),
				fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Limits)) {
		limit := r.Limits[name]
		if limit.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Child("limits").Key(string(name)), limit.String(), "must be non-negative"))
		}
	}
	return errs
}
