package dockershim

import (
	"reflect"
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

func TestClampAndEmulatePrivileged(t *testing.T) {
	t.Parallel()
	hc := &libdocker.HostConfig{CapAdd: []string{"ALL"}}
	clampCaps(hc, []string{"CAP_SYS_RESOURCE"})
	if !reflect.DeepEqual([]string(hc.CapDrop), []string{"CAP_SYS_RESOURCE"}) {
		t.Fatalf("CapDrop = %v", hc.CapDrop)
	}
	hc = &libdocker.HostConfig{CapAdd: []string{"CAP_NET_ADMIN"}}
	clampCaps(hc, []string{"CAP_SYS_RESOURCE"})
	if len(hc.CapDrop) != 0 {
		t.Fatalf("CapDrop without ALL = %v", hc.CapDrop)
	}
	hc = &libdocker.HostConfig{Privileged: true, SecurityOpt: []string{"seccomp=unconfined", "no-new-privileges"}}
	emulatePrivileged(hc, []string{"CAP_SYS_RESOURCE"})
	if hc.Privileged || hc.MaskedPaths == nil || len(hc.MaskedPaths) != 0 || hc.ReadonlyPaths == nil ||
		!reflect.DeepEqual([]string(hc.CapAdd), []string{"ALL"}) || !reflect.DeepEqual(hc.DeviceCgroupRules, []string{"a *:* rwm"}) ||
		hc.SecurityOpt[len(hc.SecurityOpt)-1] != "no-new-privileges" || len(hc.Devices) == 0 {
		t.Fatalf("emulated = %+v", hc)
	}
}
