package kuberuntime

import (
	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// envLookup returns a lookup over envs; when a name repeats, the last value wins (as
// with the container's environment itself).
func envLookup(envs []kubecontainer.EnvVar) func(string) (string, bool) {
	m := make(map[string]string, len(envs))
	for _, e := range envs {
		m[e.Name] = e.Value
	}
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// expandCommandAndArgs returns the container's command and args with $(VAR)
// references expanded from envs. Nil stays nil, so the image's entrypoint and cmd
// apply when the pod sets none.
func expandCommandAndArgs(container *v1.Container, envs []kubecontainer.EnvVar) (command, args []string) {
	lookup := envLookup(envs)
	expandAll := func(in []string) []string {
		if in == nil {
			return nil
		}
		out := make([]string, len(in))
		for i, s := range in {
			out[i] = kubecontainer.Expand(s, lookup)
		}
		return out
	}
	return expandAll(container.Command), expandAll(container.Args)
}
