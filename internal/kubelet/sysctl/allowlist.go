package sysctl

import (
	"fmt"
	"regexp"
	"strings"

	v1 "k8s.io/api/core/v1"
	nodesysctl "k8s.io/component-helpers/node/util/sysctl"
)

// forbiddenReason is the reason of a pod refused for its sysctls.
const forbiddenReason = "SysctlForbidden"

// maxNameLength is the longest sysctl name or pattern the API accepts.
const maxNameLength = 253

// patternRegex is the API's sysctl pattern syntax: dot- or slash-separated
// segments, the last of which may end with "*". The error of NewAllowlist
// quotes it unanchored, as upstream does.
const patternRegex = `([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]`

var patternRE = regexp.MustCompile("^" + patternRegex + "$")

// entry is one allowed sysctl or prefix with the kernel namespace it
// belongs to.
type entry struct {
	name string
	ns   nodesysctl.Namespace
}

// Allowlist admits a pod when each of its sysctls is allowed by name or by
// prefix and the pod does not share that sysctl's namespace with the host.
// It is immutable after NewAllowlist and safe for concurrent use.
type Allowlist struct {
	exact    map[string]nodesysctl.Namespace
	prefixes []entry // in the order given; a match is searched after exact
}

// NewAllowlist builds an Allowlist from sysctl names and patterns, either
// dot- or slash-separated; a pattern ending in "*" allows every sysctl that
// starts with the text before it. It refuses an invalid name or pattern and
// one not known to belong to a kernel namespace the pod can own.
func NewAllowlist(patterns []string) (*Allowlist, error) {
	w := &Allowlist{exact: map[string]nodesysctl.Namespace{}}
	for _, p := range patterns {
		if len(p) > maxNameLength || !patternRE.MatchString(p) {
			return nil, fmt.Errorf("sysctl %q must have at most %d characters and match regex %s",
				p, maxNameLength, patternRegex)
		}
		ns, nameOrPrefix, isPrefix := nodesysctl.GetNamespace(p)
		if ns == nodesysctl.UnknownNamespace {
			return nil, fmt.Errorf("the sysctls %q are not known to be namespaced", nameOrPrefix)
		}
		if isPrefix {
			w.prefixes = append(w.prefixes, entry{name: nameOrPrefix, ns: ns})
		} else {
			w.exact[nameOrPrefix] = ns
		}
	}
	return w, nil
}

// Admit checks every sysctl in the pod's security context. A refusal gives
// forbiddenReason and upstream's message for the first offending sysctl.
func (w *Allowlist) Admit(pod *v1.Pod) (reason, message string, ok bool) {
	if pod == nil || pod.Spec.SecurityContext == nil {
		return "", "", true
	}
	shared := hostNamespaces(&pod.Spec)
	for _, s := range pod.Spec.SecurityContext.Sysctls {
		if err := w.check(s.Name, shared); err != nil {
			return forbiddenReason, fmt.Sprintf("forbidden sysctl: %v", err), false
		}
	}
	return "", "", true
}

// hostNamespaces returns the namespaces the pod shares with the host. An
// unset hostUsers means the host user namespace.
func hostNamespaces(spec *v1.PodSpec) map[nodesysctl.Namespace]bool {
	return map[nodesysctl.Namespace]bool{
		nodesysctl.NetNamespace:  spec.HostNetwork,
		nodesysctl.IPCNamespace:  spec.HostIPC,
		nodesysctl.UserNamespace: spec.HostUsers == nil || *spec.HostUsers,
	}
}

// check decides one sysctl, named with dots or slashes.
func (w *Allowlist) check(name string, shared map[nodesysctl.Namespace]bool) error {
	name = nodesysctl.NormalizeName(name)
	ns, found := w.namespaceOf(name)
	if !found {
		return fmt.Errorf("%q not allowlisted", name)
	}
	if shared[ns] {
		return fmt.Errorf("%q not allowed with host %s enabled", name, ns)
	}
	return nil
}

// namespaceOf finds the allowed entry for a normalized sysctl name.
func (w *Allowlist) namespaceOf(name string) (nodesysctl.Namespace, bool) {
	if ns, ok := w.exact[name]; ok {
		return ns, true
	}
	for _, p := range w.prefixes {
		if strings.HasPrefix(name, p.name) {
			return p.ns, true
		}
	}
	return nodesysctl.UnknownNamespace, false
}
