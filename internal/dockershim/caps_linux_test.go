package dockershim

import (
	"reflect"
	"slices"
	"testing"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

func TestMissingCaps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc, status, last string
		want               []string
		wantErr            bool
	}{
		{"full set", "CapEff:\t000001ffffffffff\nCapBnd:\t000001ffffffffff\n", "40", nil, false},
		{"no SYS_RESOURCE", "CapBnd:\t000001fffeffffff\n", "40", []string{"CAP_SYS_RESOURCE"}, false},
		{"older kernel", "CapBnd:\t0000003fffffffff\n", "37", nil, false},
		{"no line", "Name:\tx\n", "40", nil, true},
		{"bad last", "CapBnd:\t0\n", "x", nil, true},
	} {
		got, err := missingCaps(tc.status, tc.last)
		if (err != nil) != tc.wantErr || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, %v", tc.desc, got, err)
		}
	}
}

func TestFitCaps(t *testing.T) {
	t.Parallel()
	missing := []string{"CAP_SYS_RESOURCE"}
	for _, tc := range []struct {
		desc           string
		missing        []string
		bounds         bool // the daemon bounds capabilities (Engine 23 and later)
		in             libdocker.HostConfig
		wantAdd        []string
		wantDrop       []string
		wantPrivileged bool
	}{
		{desc: "full host", in: libdocker.HostConfig{CapAdd: []string{"ALL"}, CapDrop: []string{"CAP_SYS_RESOURCE"}},
			wantAdd: []string{"ALL"}, wantDrop: []string{"CAP_SYS_RESOURCE"}},
		{desc: "20.10: ALL drops the missing", missing: missing, in: libdocker.HostConfig{CapAdd: []string{"ALL"}},
			wantAdd: []string{"ALL"}, wantDrop: missing},
		{desc: "20.10: other adds", missing: missing, in: libdocker.HostConfig{CapAdd: []string{"CAP_NET_ADMIN"}},
			wantAdd: []string{"CAP_NET_ADMIN"}},
		{desc: "20.10: privileged is emulated", missing: missing, in: libdocker.HostConfig{Privileged: true},
			wantAdd: []string{"ALL"}, wantDrop: missing},
		{desc: "26: ALL as asked", missing: missing, bounds: true, in: libdocker.HostConfig{CapAdd: []string{"ALL"}},
			wantAdd: []string{"ALL"}},
		{desc: "26: privileged as asked", missing: missing, bounds: true, in: libdocker.HostConfig{Privileged: true},
			wantPrivileged: true},
		{desc: "26: a drop of a missing capability is left out", missing: missing, bounds: true,
			in:       libdocker.HostConfig{CapDrop: []string{"CAP_NET_RAW", "CAP_SYS_RESOURCE"}},
			wantDrop: []string{"CAP_NET_RAW"}},
		{desc: "20.10 in a node container: capabilities it does not know are not named", bounds: false,
			missing: []string{"CAP_SYS_RESOURCE", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE"},
			in:      libdocker.HostConfig{Privileged: true},
			wantAdd: []string{"ALL"}, wantDrop: missing},
		{desc: "20.10 in a node container: ALL", bounds: false,
			missing: []string{"CAP_SYS_RESOURCE", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE"},
			in:      libdocker.HostConfig{CapAdd: []string{"ALL"}, CapDrop: []string{"CAP_BPF"}},
			wantAdd: []string{"ALL"}, wantDrop: missing},
		{desc: "20.10: ALL and a drop of the missing one", missing: missing,
			in:      libdocker.HostConfig{CapAdd: []string{"ALL"}, CapDrop: []string{"CAP_SYS_RESOURCE"}},
			wantAdd: []string{"ALL"}, wantDrop: missing},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			h := &hostInfo{missingCaps: tc.missing, daemonBoundsCaps: tc.bounds}
			hc := tc.in
			h.fitCaps(&hc)
			if !slices.Equal(hc.CapAdd, tc.wantAdd) || !slices.Equal(hc.CapDrop, tc.wantDrop) || hc.Privileged != tc.wantPrivileged {
				t.Fatalf("CapAdd %v, CapDrop %v, Privileged %v; want %v, %v, %v",
					hc.CapAdd, hc.CapDrop, hc.Privileged, tc.wantAdd, tc.wantDrop, tc.wantPrivileged)
			}
		})
	}
}

func TestEmulatePrivileged(t *testing.T) {
	t.Parallel()
	hc := &libdocker.HostConfig{Privileged: true, SecurityOpt: []string{"seccomp=unconfined", "no-new-privileges"}}
	emulatePrivileged(hc, []string{"CAP_SYS_RESOURCE"})
	if hc.Privileged || hc.MaskedPaths == nil || len(hc.MaskedPaths) != 0 || hc.ReadonlyPaths == nil ||
		!reflect.DeepEqual([]string(hc.CapAdd), []string{"ALL"}) || !reflect.DeepEqual(hc.DeviceCgroupRules, []string{"a *:* rwm"}) ||
		hc.SecurityOpt[len(hc.SecurityOpt)-1] != "no-new-privileges" || len(hc.Devices) == 0 {
		t.Fatalf("emulated = %+v", hc)
	}
}
