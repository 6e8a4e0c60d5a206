// Package sysctl decides which pod sysctls the kubelet admits, with the
// behaviour and the user-visible messages of upstream's sysctl admit handler
// (pkg/kubelet/sysctl): the safe sysctls the running kernel namespaces, plus
// the names and prefix patterns an administrator allows with
// allowedUnsafeSysctls. A sysctl is only admitted when it is known to be
// namespaced, and never when the pod shares that namespace with the host
// (hostNetwork, hostIPC, or the host user namespace).
//
// Only the kubelet's wiring (cmd and internal/kubelet) may import it. It
// imports no other package of this project and, apart from KernelVersion,
// does no I/O.
//
// Typical use when building the kubelet:
//
//	release, err := sysctl.KernelVersion()
//	if err != nil {
//		logger.Warn("unknown kernel version, keeping only the sysctls safe on every kernel", zap.Error(err))
//	}
//	allow, err := sysctl.NewAllowlist(append(sysctl.SafeSysctls(release), cfg.AllowedUnsafeSysctls...))
//	if err != nil {
//		return fmt.Errorf("allowedUnsafeSysctls: %w", err)
//	}
//	opts.Sysctls = allow // Admit(pod) refuses with reason "SysctlForbidden"
package sysctl
