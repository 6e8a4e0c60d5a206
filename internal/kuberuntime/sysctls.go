package kuberuntime

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	nodesysctl "k8s.io/component-helpers/node/util/sysctl"
)

// ipcSysctls are the IPC namespace's sysctls besides fs.mqueue.* (upstream's
// validSysctlMap).
var ipcSysctls = map[string]bool{
	"kernel.msgmax": true, "kernel.msgmnb": true, "kernel.msgmni": true, "kernel.sem": true,
	"kernel.shmall": true, "kernel.shmmax": true, "kernel.shmmni": true, "kernel.shm_rmid_forced": true,
}

// applyDefaultSysctls puts the node's default pod sysctls into a sandbox's
// sysctls (normalized names), as upstream's applyPodSysctls: each only when
// the pod has its namespace (IPC ones unless hostIPC, net.* unless
// hostNetwork, user.* only in a user namespace of its own,
// kernel.domainname unless hostNetwork). The pod's own sysctls are put
// after, and win.
func applyDefaultSysctls(sysctls, defaults map[string]string, pod *v1.Pod) {
	for k, v := range defaults {
		n := nodesysctl.NormalizeName(k)
		switch {
		case ipcSysctls[n] || strings.HasPrefix(n, "fs.mqueue."):
			if !pod.Spec.HostIPC {
				sysctls[n] = v
			}
		case strings.HasPrefix(n, "net."):
			if !pod.Spec.HostNetwork {
				sysctls[n] = v
			}
		case strings.HasPrefix(n, "user."):
			if pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers {
				sysctls[n] = v
			}
		case n == "kernel.domainname":
			if !pod.Spec.HostNetwork {
				sysctls[n] = v
			}
		}
	}
}
