package sysctl

import (
	"fmt"
	"testing"
)

// ValidateDefaults has upstream's three messages.
func TestValidateDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		defaults map[string]string
		want     string
	}{
		{map[string]string{"net.ipv4.ip_local_port_range": "1024 65535", "kernel.shm_rmid_forced": "1"}, "[]"},
		{map[string]string{"Net.IPv4": "1"}, `[invalid configuration: "Net.IPv4" is not a valid sysctl name for defaultPodSysctls]`},
		{map[string]string{"vm.swappiness": "10"}, `[invalid configuration: "vm.swappiness" is not known to be namespaced for defaultPodSysctls]`},
		{map[string]string{"net.ipv4.tcp_syncookies": "1", "net/ipv4/tcp_syncookies": "0"},
			`[invalid configuration: duplicate sysctl "net.ipv4.tcp_syncookies" found in defaultPodSysctls]`},
	} {
		if got := fmt.Sprint(ValidateDefaults(tc.defaults)); got != tc.want {
			t.Errorf("ValidateDefaults(%v) = %s, want %s", tc.defaults, got, tc.want)
		}
	}
}
