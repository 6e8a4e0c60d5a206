package nodestatus

import (
	"errors"
	"net"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestNodeAddresses(t *testing.T) {
	t.Parallel()
	ips := func(s ...string) []net.IP {
		out := make([]net.IP, 0, len(s))
		for _, x := range s {
			out = append(out, net.ParseIP(x))
		}
		return out
	}
	local := map[string]bool{"10.0.0.5": true, "fd00::5": true, "127.0.0.1": true, "10.1.1.1": true, "fd00::9": true}
	for _, test := range []struct {
		desc     string
		nodeIPs  []net.IP
		hostname string
		lookup   []net.IP
		route    net.IP
		want     []string // InternalIPs; the Hostname address follows
		wantErr  bool
	}{
		{desc: "given", nodeIPs: ips("10.0.0.5"), want: []string{"10.0.0.5"}},
		{desc: "given loopback", nodeIPs: ips("127.0.0.1"), want: []string{"127.0.0.1"}},
		{desc: "given dual stack", nodeIPs: ips("10.0.0.5", "fd00::5"), want: []string{"10.0.0.5", "fd00::5"}},
		{desc: "given but not local", nodeIPs: ips("10.9.9.9"), wantErr: true},
		{desc: "hostname is an IP", hostname: "10.2.2.2", want: []string{"10.2.2.2"}},
		{desc: "lookup skips loopback and non-local, prefers IPv4", lookup: ips("127.0.0.1", "fd00::9", "10.7.7.7", "10.1.1.1"),
			route: net.ParseIP("192.0.2.2"), want: []string{"10.1.1.1"}},
		{desc: "lookup IPv6 when nothing else", lookup: ips("fd00::9"), want: []string{"fd00::9"}},
		{desc: "unspecified IPv6 prefers IPv6", nodeIPs: ips("::"), lookup: ips("10.1.1.1", "fd00::9"), want: []string{"fd00::9"}},
		{desc: "default route", lookup: ips("127.0.0.1"), route: net.ParseIP("192.0.2.2"), want: []string{"192.0.2.2"}},
		{desc: "nothing", wantErr: true},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			c, _, _, _, _ := testController(t, Options{NodeIPs: test.nodeIPs, Hostname: test.hostname})
			if test.nodeIPs == nil {
				c.opts.NodeIPs = nil
			}
			c.localIP = func(ip net.IP) error {
				if local[ip.String()] {
					return nil
				}
				return errors.New("not local")
			}
			c.lookupIP = func(string) ([]net.IP, error) { return test.lookup, nil }
			c.defaultRouteIP = func(net.IP) (net.IP, error) {
				if test.route == nil {
					return nil, errors.New("no default route")
				}
				return test.route, nil
			}
			got, err := c.nodeAddresses()
			if (err != nil) != test.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, test.wantErr)
			}
			if test.wantErr {
				return
			}
			var want []v1.NodeAddress
			for _, ip := range test.want {
				want = append(want, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
			}
			want = append(want, v1.NodeAddress{Type: v1.NodeHostName, Address: c.opts.Hostname})
			if !reflect.DeepEqual(got, want) {
				t.Errorf("addresses = %v, want %v", got, want)
			}
		})
	}
}
