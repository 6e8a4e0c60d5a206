// Package runtimehelper is the kubelet's side of the runtime manager
// (container.RuntimeHelper, upstream's kubelet runtime helper): for each
// container it resolves the environment (env, envFrom, the downward API with
// resources.ResolveFieldRef, service links; env.go), the mounts (volumes with
// subPath, the managed /etc/hosts, the termination message file; mounts.go)
// and the hostname, and for each pod its DNS configuration and directories.
//
// The kubelet records the volumes it set up for a pod (SetVolumes) before the
// runtime manager starts the pod's containers, and forgets them once they are
// torn down (ForgetVolumes).
//
// Only internal/kubelet (the coordinator) and internal/app may import it.
package runtimehelper
