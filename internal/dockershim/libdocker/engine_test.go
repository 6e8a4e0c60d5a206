package libdocker

import "testing"

func TestDaemonBoundsCapabilities(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		apiVersion string
		want       bool
	}{
		{"1.41", false}, // Engine 20.10
		{"1.42", true},  // 23.0
		{"1.45", true},  // 26.1
		{"1.51", true},
		{"", false},
	} {
		if got := DaemonBoundsCapabilities(tc.apiVersion); got != tc.want {
			t.Errorf("DaemonBoundsCapabilities(%q) = %v, want %v", tc.apiVersion, got, tc.want)
		}
	}
}
