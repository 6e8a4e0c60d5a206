package dockershim

import (
	"fmt"
	"testing"

	godbus "github.com/godbus/dbus/v5"
)

func TestNoSuchUnit(t *testing.T) {
	t.Parallel()
	gone := godbus.Error{Name: "org.freedesktop.systemd1.NoSuchUnit"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{gone, true},
		{&gone, true},
		{fmt.Errorf("set: %w", gone), true},
		{godbus.Error{Name: "org.freedesktop.DBus.Error.AccessDenied"}, false},
		{fmt.Errorf("plain"), false},
		{nil, false},
	} {
		if got := noSuchUnit(tc.err); got != tc.want {
			t.Errorf("noSuchUnit(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
