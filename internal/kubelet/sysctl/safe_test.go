package sysctl

import (
	"slices"
	"testing"
)

func TestSafeSysctlsFor(t *testing.T) {
	t.Parallel()
	always := []string{
		"kernel.shm_rmid_forced",
		"net.ipv4.ip_local_port_range",
		"net.ipv4.tcp_syncookies",
		"net.ipv4.ping_group_range",
		"net.ipv4.ip_unprivileged_port_start",
	}
	all := append(slices.Clone(always),
		"net.ipv4.ip_local_reserved_ports",
		"net.ipv4.tcp_keepalive_time",
		"net.ipv4.tcp_fin_timeout",
		"net.ipv4.tcp_keepalive_intvl",
		"net.ipv4.tcp_keepalive_probes",
		"net.ipv4.tcp_rmem",
		"net.ipv4.tcp_wmem",
		"net.ipv4.tcp_slow_start_after_idle",
		"net.ipv4.tcp_notsent_lowat",
	)
	for _, tc := range []struct {
		desc   string
		kernel string
		want   []string
	}{
		{desc: "unknown kernel", kernel: "", want: always},
		{desc: "unparsable kernel", kernel: "not-a-version", want: always},
		{desc: "kernel older than every requirement", kernel: "3.10.0-1160.el7.x86_64", want: always},
		{desc: "el7 kernel 3.18", kernel: "3.18.0-957.27.2.el7.x86_64",
			want: append(slices.Clone(always), "net.ipv4.ip_local_reserved_ports")},
		{desc: "kernel 4.5 exactly", kernel: "4.5.0", want: append(slices.Clone(always),
			"net.ipv4.ip_local_reserved_ports",
			"net.ipv4.tcp_keepalive_time",
			"net.ipv4.tcp_keepalive_intvl",
			"net.ipv4.tcp_keepalive_probes",
		)},
		{desc: "kernel 4.14 lacks the 4.15 sysctls", kernel: "4.14.355", want: append(slices.Clone(always),
			"net.ipv4.ip_local_reserved_ports",
			"net.ipv4.tcp_keepalive_time",
			"net.ipv4.tcp_fin_timeout",
			"net.ipv4.tcp_keepalive_intvl",
			"net.ipv4.tcp_keepalive_probes",
			"net.ipv4.tcp_notsent_lowat",
		)},
		{desc: "new kernel", kernel: "5.15.0-75-generic", want: all},
		{desc: "release with trailing newline", kernel: "6.8.0-45-generic\n", want: all},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := safeSysctlsFor(tc.kernel); !slices.Equal(got, tc.want) {
				t.Errorf("safeSysctlsFor(%q) =\n%q\nwant\n%q", tc.kernel, got, tc.want)
			}
		})
	}
}

func TestSafeSysctlsPlatform(t *testing.T) {
	t.Parallel()
	got := SafeSysctls("5.15.0")
	if !platformHasSysctls {
		if got != nil {
			t.Fatalf("SafeSysctls on a platform without sysctls = %q, want nil", got)
		}
		return
	}
	if want := safeSysctlsFor("5.15.0"); !slices.Equal(got, want) {
		t.Fatalf("SafeSysctls = %q, want %q", got, want)
	}
}

func TestKernelVersion(t *testing.T) {
	t.Parallel()
	release, err := KernelVersion()
	if !platformHasSysctls {
		if err == nil {
			t.Fatalf("KernelVersion() = %q, want an error on this platform", release)
		}
		return
	}
	if err != nil {
		t.Fatalf("KernelVersion: %v", err)
	}
	if len(SafeSysctls(release)) < len(safeSysctlsFor("")) {
		t.Errorf("release %q keeps fewer sysctls than an unknown kernel", release)
	}
}
