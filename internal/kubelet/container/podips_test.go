package container

import (
	"net"
	"strings"
	"testing"
)

func TestSortPodIPs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc   string
		nodeIP string
		ips    []string
		want   string
	}{
		{desc: "v4 node", nodeIP: "10.0.0.1", ips: []string{"fd00::1", "10.1.0.1", "10.1.0.2"}, want: "10.1.0.1,fd00::1"},
		{desc: "v6 node", nodeIP: "fd00::10", ips: []string{"10.1.0.1", "fd00::1"}, want: "fd00::1,10.1.0.1"},
		{desc: "no node IP", ips: []string{"fd00::1"}, want: "fd00::1"},
		{desc: "garbage dropped", ips: []string{"nope", "10.1.0.1"}, want: "10.1.0.1"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := strings.Join(SortPodIPs(net.ParseIP(tc.nodeIP), tc.ips), ","); got != tc.want {
				t.Errorf("SortPodIPs = %s, want %s", got, tc.want)
			}
		})
	}
}
