package sysctl

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

const patternErrSuffix = ` must have at most 253 characters and match regex ([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]`

func TestNewAllowlist(t *testing.T) {
	t.Parallel()
	long := "net." + strings.Repeat("a", 250) // 254 characters
	for _, tc := range []struct {
		desc     string
		patterns []string
		wantErr  string // empty: valid
	}{
		{desc: "safe sysctls", patterns: safeSysctlsFor("6.1")},
		{desc: "exact and prefix", patterns: []string{"kernel.msg*", "kernel.sem", "net.b.*", "user.*", "fs.mqueue.*"}},
		{desc: "slash separated", patterns: []string{"kernel/msg*", "kernel/sem", "net/ipv4/conf/eno2.100/rp_filter"}},
		{desc: "empty list", patterns: nil},
		{desc: "leading space", patterns: []string{" kernel.msg*"}, wantErr: `sysctl " kernel.msg*"` + patternErrSuffix},
		{desc: "trailing space", patterns: []string{"kernel.msg* "}, wantErr: `sysctl "kernel.msg* "` + patternErrSuffix},
		{desc: "dash segment", patterns: []string{"net.-"}, wantErr: `sysctl "net.-"` + patternErrSuffix},
		{desc: "star inside", patterns: []string{"net.*.foo"}, wantErr: `sysctl "net.*.foo"` + patternErrSuffix},
		{desc: "star before slash", patterns: []string{"net.*/foo"}, wantErr: `sysctl "net.*/foo"` + patternErrSuffix},
		{desc: "upper case", patterns: []string{"Net.ipv4.tcp_syncookies"}, wantErr: `sysctl "Net.ipv4.tcp_syncookies"` + patternErrSuffix},
		{desc: "empty name", patterns: []string{""}, wantErr: `sysctl ""` + patternErrSuffix},
		{desc: "too long", patterns: []string{long}, wantErr: `sysctl "` + long + `"` + patternErrSuffix},
		{desc: "unknown name", patterns: []string{"foo"}, wantErr: `the sysctls "foo" are not known to be namespaced`},
		{desc: "unknown prefix", patterns: []string{"foo*"}, wantErr: `the sysctls "foo" are not known to be namespaced`},
		{desc: "prefix without dot", patterns: []string{"net*"}, wantErr: `the sysctls "net" are not known to be namespaced`},
		{desc: "bare star", patterns: []string{"*"}, wantErr: `the sysctls "" are not known to be namespaced`},
		{desc: "host-wide kernel sysctl", patterns: []string{"kernel.panic"}, wantErr: `the sysctls "kernel.panic" are not known to be namespaced`},
		{desc: "slash separated unknown, normalized", patterns: []string{"vm/swappiness"}, wantErr: `the sysctls "vm.swappiness" are not known to be namespaced`},
		{desc: "first error wins", patterns: []string{"net.ipv4.tcp_syncookies", "foo", "net.-"}, wantErr: `the sysctls "foo" are not known to be namespaced`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			w, err := NewAllowlist(tc.patterns)
			if tc.wantErr == "" {
				if err != nil || w == nil {
					t.Fatalf("NewAllowlist(%q) = %v, %v; want an allowlist", tc.patterns, w, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("NewAllowlist(%q) succeeded, want error %q", tc.patterns, tc.wantErr)
			}
			if err.Error() != tc.wantErr {
				t.Errorf("NewAllowlist(%q) error\n%s\nwant\n%s", tc.patterns, err, tc.wantErr)
			}
		})
	}
}

// sysctlPod returns a pod setting the named sysctls, sharing the host user
// namespace only when hostUsers is true.
func sysctlPod(hostNet, hostIPC, hostUsers bool, names ...string) *v1.Pod {
	pod := &v1.Pod{Spec: v1.PodSpec{HostNetwork: hostNet, HostIPC: hostIPC, HostUsers: &hostUsers}}
	pod.Spec.SecurityContext = &v1.PodSecurityContext{}
	for _, n := range names {
		pod.Spec.SecurityContext.Sysctls = append(pod.Spec.SecurityContext.Sysctls, v1.Sysctl{Name: n, Value: "1"})
	}
	return pod
}

func TestAdmit(t *testing.T) {
	t.Parallel()
	w, err := NewAllowlist(append(safeSysctlsFor("5.15.0"),
		"kernel.msg*", "kernel.sem", "kernel/shm*", "net.b.*", "user.*", "fs.mqueue.*",
		"net/ipv4/conf/eno2.100/rp_filter", "kernel.domainname"))
	if err != nil {
		t.Fatalf("NewAllowlist: %v", err)
	}
	hostUsersUnset := sysctlPod(false, false, false, "user.max_user_namespaces")
	hostUsersUnset.Spec.HostUsers = nil
	for _, tc := range []struct {
		desc    string
		pod     *v1.Pod
		wantMsg string // empty: admitted
	}{
		{desc: "no security context", pod: &v1.Pod{}},
		{desc: "no sysctls", pod: sysctlPod(true, true, true)},
		{desc: "safe exact", pod: sysctlPod(false, false, false, "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range")},
		{desc: "safe sysctl of a new kernel", pod: sysctlPod(false, false, false, "net.ipv4.tcp_keepalive_time")},
		{desc: "allowed exact", pod: sysctlPod(false, false, false, "kernel.sem")},
		{desc: "allowed by prefix", pod: sysctlPod(false, false, false, "kernel.msgmax", "net.b.c", "fs.mqueue.msg_max")},
		{desc: "user namespace sysctl with own user namespace", pod: sysctlPod(false, false, false, "user.max_user_namespaces")},
		{desc: "UTS sysctl is not checked against host network", pod: sysctlPod(true, true, true, "kernel.domainname")},
		{desc: "net sysctl allowed with host IPC", pod: sysctlPod(false, true, false, "net.ipv4.tcp_syncookies")},
		{desc: "IPC sysctl allowed with host network", pod: sysctlPod(true, false, false, "kernel.shm_rmid_forced")},
		{desc: "slash separated safe", pod: sysctlPod(false, false, false, "kernel/shm_rmid_forced", "net/ipv4/ip_local_port_range")},
		{desc: "slash separated with dotted interface", pod: sysctlPod(false, false, false, "net/ipv4/conf/eno2.100/rp_filter")},
		{desc: "slash separated prefix", pod: sysctlPod(false, false, false, "kernel/shmmax")},

		{desc: "unknown sysctl", pod: sysctlPod(false, false, false, "foo"),
			wantMsg: `forbidden sysctl: "foo" not allowlisted`},
		{desc: "net sysctl not allowed", pod: sysctlPod(false, false, false, "net.a.b.c"),
			wantMsg: `forbidden sysctl: "net.a.b.c" not allowlisted`},
		{desc: "exact name is not a prefix", pod: sysctlPod(false, false, false, "net.ipv4.ip_local_port_range.a.b.c"),
			wantMsg: `forbidden sysctl: "net.ipv4.ip_local_port_range.a.b.c" not allowlisted`},
		{desc: "first refused sysctl is reported", pod: sysctlPod(false, false, false, "kernel.sem", "vm.swappiness", "foo"),
			wantMsg: `forbidden sysctl: "vm.swappiness" not allowlisted`},
		{desc: "slash separated refused, message uses dots", pod: sysctlPod(false, false, false, "vm/overcommit_memory"),
			wantMsg: `forbidden sysctl: "vm.overcommit_memory" not allowlisted`},
		{desc: "host network, safe net sysctl", pod: sysctlPod(true, false, false, "net.ipv4.ip_local_port_range"),
			wantMsg: `forbidden sysctl: "net.ipv4.ip_local_port_range" not allowed with host Net enabled`},
		{desc: "host network, prefixed net sysctl", pod: sysctlPod(true, false, false, "net.b.c"),
			wantMsg: `forbidden sysctl: "net.b.c" not allowed with host Net enabled`},
		{desc: "host network, slash separated net sysctl", pod: sysctlPod(true, false, false, "net/ipv4/tcp_syncookies"),
			wantMsg: `forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host Net enabled`},
		{desc: "host IPC, kernel.shm_rmid_forced", pod: sysctlPod(false, true, false, "kernel.shm_rmid_forced"),
			wantMsg: `forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host IPC enabled`},
		{desc: "host IPC, kernel.shm prefix", pod: sysctlPod(false, true, false, "kernel/shmall"),
			wantMsg: `forbidden sysctl: "kernel.shmall" not allowed with host IPC enabled`},
		{desc: "host IPC, kernel.msgmax", pod: sysctlPod(false, true, false, "kernel.msgmax"),
			wantMsg: `forbidden sysctl: "kernel.msgmax" not allowed with host IPC enabled`},
		{desc: "host IPC, kernel.sem", pod: sysctlPod(false, true, false, "kernel.sem"),
			wantMsg: `forbidden sysctl: "kernel.sem" not allowed with host IPC enabled`},
		{desc: "host IPC, mqueue", pod: sysctlPod(false, true, false, "fs.mqueue.queues_max"),
			wantMsg: `forbidden sysctl: "fs.mqueue.queues_max" not allowed with host IPC enabled`},
		{desc: "host user namespace", pod: sysctlPod(false, false, true, "user.max_user_namespaces"),
			wantMsg: `forbidden sysctl: "user.max_user_namespaces" not allowed with host User enabled`},
		{desc: "unset hostUsers is the host user namespace", pod: hostUsersUnset,
			wantMsg: `forbidden sysctl: "user.max_user_namespaces" not allowed with host User enabled`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			reason, msg, ok := w.Admit(tc.pod)
			if tc.wantMsg == "" {
				if !ok || reason != "" || msg != "" {
					t.Fatalf("Admit = %q, %q, %v; want admitted", reason, msg, ok)
				}
				return
			}
			if ok || reason != "SysctlForbidden" || msg != tc.wantMsg {
				t.Errorf("Admit = %q, %q, %v\nwant %q, %q, false", reason, msg, ok, "SysctlForbidden", tc.wantMsg)
			}
		})
	}
}

func TestAdmitOnlyAllowedList(t *testing.T) {
	t.Parallel()
	// Without the safe list, even a safe sysctl is refused.
	w, err := NewAllowlist([]string{"net.ipv4.tcp_syncookies"})
	if err != nil {
		t.Fatalf("NewAllowlist: %v", err)
	}
	_, msg, ok := w.Admit(sysctlPod(false, false, false, "kernel.shm_rmid_forced"))
	if want := `forbidden sysctl: "kernel.shm_rmid_forced" not allowlisted`; ok || msg != want {
		t.Errorf("Admit = %q, %v; want %q, false", msg, ok, want)
	}
}
