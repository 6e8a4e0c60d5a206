package sysctl

import (
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/util/sets"
	nodesysctl "k8s.io/component-helpers/node/util/sysctl"
)

// nameRE is upstream's sysctl name syntax (dot- or slash-separated).
var nameRE = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

// ValidateDefaults checks defaultPodSysctls as upstream's configuration
// validation does: valid names, each known to be namespaced, none twice
// once normalized.
func ValidateDefaults(defaults map[string]string) []error {
	var errs []error
	seen := sets.New[string]()
	for _, k := range sets.List(sets.KeySet(defaults)) {
		if len(k) > maxNameLength || !nameRE.MatchString(k) {
			errs = append(errs, fmt.Errorf("invalid configuration: %q is not a valid sysctl name for defaultPodSysctls", k))
			continue
		}
		if ns, _, _ := nodesysctl.GetNamespace(k); ns == nodesysctl.UnknownNamespace {
			errs = append(errs, fmt.Errorf("invalid configuration: %q is not known to be namespaced for defaultPodSysctls", k))
		}
		n := nodesysctl.NormalizeName(k)
		if seen.Has(n) {
			errs = append(errs, fmt.Errorf("invalid configuration: duplicate sysctl %q found in defaultPodSysctls", n))
		}
		seen.Insert(n)
	}
	return errs
}
