package network

import (
	"net"
	"net/netip"
	"reflect"
	"testing"

	cnitypes "github.com/containernetworking/cni/pkg/types"
	types040 "github.com/containernetworking/cni/pkg/types/040"
	types100 "github.com/containernetworking/cni/pkg/types/100"
)

func ipc(t *testing.T, cidr string, iface *int) *types100.IPConfig {
	t.Helper()
	ip, n, err := net.ParseCIDR(cidr)
	if err != nil {
		t.Fatal(err)
	}
	n.IP = ip
	return &types100.IPConfig{Address: *n, Interface: iface}
}

func TestInterfaceIPs(t *testing.T) {
	t.Parallel()
	bridgeIfaces := []*types100.Interface{
		{Name: "cni0"},
		{Name: "veth1234"},
		{Name: "eth0", Sandbox: "/proc/42/ns/net"},
	}
	for _, tc := range []struct {
		desc string
		res  *types100.Result
		want []string
	}{
		{
			desc: "bridge result: the sandbox eth0 address only",
			res: &types100.Result{Interfaces: bridgeIfaces, IPs: []*types100.IPConfig{
				ipc(t, "10.1.0.1/24", types100.Int(0)),
				ipc(t, "10.1.0.7/24", types100.Int(2)),
			}},
			want: []string{"10.1.0.7"},
		},
		{
			desc: "dual stack: IPv4 first, then IPv6, each in plugin order",
			res: &types100.Result{Interfaces: bridgeIfaces, IPs: []*types100.IPConfig{
				ipc(t, "fd00::7/64", types100.Int(2)),
				ipc(t, "10.1.0.7/24", types100.Int(2)),
				ipc(t, "fd00::8/64", types100.Int(2)),
				ipc(t, "10.1.0.8/24", types100.Int(2)),
			}},
			want: []string{"10.1.0.7", "10.1.0.8", "fd00::7", "fd00::8"},
		},
		{
			desc: "IPs naming no interface belong to the pod",
			res: &types100.Result{IPs: []*types100.IPConfig{
				ipc(t, "10.2.0.5/24", nil),
			}},
			want: []string{"10.2.0.5"},
		},
		{
			desc: "an eth0 without sandbox is used when no sandbox eth0 exists",
			res: &types100.Result{Interfaces: []*types100.Interface{{Name: "eth0"}}, IPs: []*types100.IPConfig{
				ipc(t, "10.3.0.5/24", types100.Int(0)),
				ipc(t, "10.3.0.6/24", nil),
			}},
			want: []string{"10.3.0.5"},
		},
		{
			desc: "out of range and other interfaces are ignored",
			res: &types100.Result{Interfaces: bridgeIfaces, IPs: []*types100.IPConfig{
				ipc(t, "10.1.0.1/24", types100.Int(0)),
				ipc(t, "10.1.0.9/24", types100.Int(9)),
				nil,
			}},
			want: nil,
		},
		{
			desc: "empty result",
			res:  &types100.Result{},
			want: nil,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := ipv4First(interfaceIPConfigs(tc.res, "eth0")); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("interface IPs = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNewResultConvertsOlderVersions(t *testing.T) {
	t.Parallel()
	_, n, _ := net.ParseCIDR("10.4.0.0/24")
	n.IP = net.ParseIP("10.4.0.9").To4()
	old := &types040.Result{
		CNIVersion: "0.4.0",
		Interfaces: []*types040.Interface{{Name: "cni0"}, {Name: "eth0", Sandbox: "/run/netns/x"}},
		IPs:        []*types040.IPConfig{{Interface: types040.Int(1), Address: *n}},
	}
	var res cnitypes.Result = old
	got, err := newResult(res, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	want := &Result{IPs: []string{"10.4.0.9"}, Interface: "eth0", Subnets: []netip.Prefix{netip.MustParsePrefix("10.4.0.0/24")}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("newResult = %+v", got)
	}
	if _, err := newResult(nil, "eth0"); err == nil {
		t.Error("newResult(nil) succeeded")
	}
}

func TestSubnets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		ips  []string
		want []string
	}{
		{desc: "bridge + host-local: the pod's /24", ips: []string{"10.244.0.7/24"}, want: []string{"10.244.0.0/24"}},
		{desc: "dual stack, one subnet each", ips: []string{"10.244.0.7/24", "fd00:10:244::7/64"}, want: []string{"10.244.0.0/24", "fd00:10:244::/64"}},
		{desc: "two addresses of one subnet count once", ips: []string{"10.244.0.7/16", "10.244.1.8/16"}, want: []string{"10.244.0.0/16"}},
		{desc: "host-length masks route each pod on its own", ips: []string{"192.168.3.4/32", "fd00::4/128"}},
		{desc: "loopback, link-local and unspecified addresses are no pod subnet", ips: []string{"127.0.0.1/8", "169.254.1.2/16", "fe80::1/64", "0.0.0.0/0"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			var ips []*types100.IPConfig
			for _, c := range tc.ips {
				ips = append(ips, ipc(t, c, nil))
			}
			var got []string
			for _, p := range subnets(ips) {
				got = append(got, p.String())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("subnets(%v) = %v, want %v", tc.ips, got, tc.want)
			}
		})
	}
}
