package sysctl

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// safeSysctl is one sysctl that is namespaced and isolated: setting it in a
// pod has no effect on any other pod of the node.
type safeSysctl struct {
	name string
	// minKernel is the first kernel release that namespaces the sysctl;
	// empty when every supported kernel does.
	minKernel string
}

// safeSysctlTable lists upstream's safe sysctls in upstream's order. The
// kernel releases are those of upstream's pkg/util/kernel constants, each
// the release of the commit that moved the sysctl into the network
// namespace.
func safeSysctlTable() []safeSysctl {
	return []safeSysctl{
		{name: "kernel.shm_rmid_forced"},
		{name: "net.ipv4.ip_local_port_range"},
		{name: "net.ipv4.tcp_syncookies"},
		{name: "net.ipv4.ping_group_range"},
		{name: "net.ipv4.ip_unprivileged_port_start"},
		{name: "net.ipv4.ip_local_reserved_ports", minKernel: "3.16"},
		{name: "net.ipv4.tcp_keepalive_time", minKernel: "4.5"},
		{name: "net.ipv4.tcp_fin_timeout", minKernel: "4.6"},
		{name: "net.ipv4.tcp_keepalive_intvl", minKernel: "4.5"},
		{name: "net.ipv4.tcp_keepalive_probes", minKernel: "4.5"},
		{name: "net.ipv4.tcp_rmem", minKernel: "4.15"},
		{name: "net.ipv4.tcp_wmem", minKernel: "4.15"},
		{name: "net.ipv4.tcp_slow_start_after_idle", minKernel: "4.15"},
		{name: "net.ipv4.tcp_notsent_lowat", minKernel: "4.6"},
	}
}

// SafeSysctls returns upstream's safe sysctls that the given kernel release
// (as printed by uname -r, e.g. "5.15.0-75-generic") namespaces. With an
// empty or unparsable release it returns only the sysctls that need no
// particular kernel; it logs nothing, the caller reports the unknown
// release. On platforms without sysctls it returns nil, as upstream does.
func SafeSysctls(kernelVersion string) []string {
	if !platformHasSysctls {
		return nil
	}
	return safeSysctlsFor(kernelVersion)
}

// safeSysctlsFor is SafeSysctls without the platform check.
func safeSysctlsFor(kernelVersion string) []string {
	// A nil kernel (unknown release) keeps only the unconditional sysctls.
	kernel, err := version.ParseGeneric(strings.TrimSpace(kernelVersion))
	if err != nil {
		kernel = nil
	}
	var names []string
	for _, s := range safeSysctlTable() {
		if s.minKernel != "" && (kernel == nil || !kernel.AtLeast(version.MustParseGeneric(s.minKernel))) {
			continue
		}
		names = append(names, s.name)
	}
	return names
}
