package network

import (
	"fmt"
	"net/netip"
	"slices"

	cnitypes "github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
)

// Result is what SetUpPod learned from the default network's ADD.
type Result struct {
	// IPs of the pod's interface, IPv4 first then IPv6, each family in the
	// order the plugins returned them, so the primary address comes first.
	IPs []string
	// Interface is the name of the pod's interface in its netns ("eth0").
	Interface string
	// Subnets are the networks of those IPs (address and mask of the
	// result, masked), for the host's FORWARD rules: none for an address
	// with a host-length mask (/32, /128: a plugin that routes each pod on
	// its own), a loopback or a link-local one.
	Subnets []netip.Prefix
}

// newResult converts a result of any CNI version into a Result for ifName.
func newResult(res cnitypes.Result, ifName string) (*Result, error) {
	if res == nil {
		return nil, fmt.Errorf("network returned no result")
	}
	cur, err := types100.NewResultFromResult(res)
	if err != nil {
		return nil, fmt.Errorf("converting CNI result version %s: %w", res.Version(), err)
	}
	ips := interfaceIPConfigs(cur, ifName)
	return &Result{IPs: ipv4First(ips), Interface: ifName, Subnets: subnets(ips)}, nil
}

// subnets returns the distinct networks of ips that pod traffic is routed
// to as a whole (see Result.Subnets).
func subnets(ips []*types100.IPConfig) []netip.Prefix {
	var out []netip.Prefix
	for _, ip := range ips {
		addr, ok := netip.AddrFromSlice(ip.Address.IP)
		if !ok {
			continue
		}
		addr = addr.Unmap()
		ones, bits := ip.Address.Mask.Size()
		if bits != addr.BitLen() || ones == bits || addr.IsLoopback() || addr.IsLinkLocalUnicast() || addr.IsUnspecified() {
			continue
		}
		p := netip.PrefixFrom(addr, ones).Masked()
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// interfaceIPConfigs returns the IP configs the result assigns to the
// sandbox interface ifName, in the result's order. The best match wins: IPs on an interface
// named ifName inside a sandbox, else on any interface named ifName, else IPs
// that name no interface at all (as an IPAM-only chain reports them).
func interfaceIPConfigs(res *types100.Result, ifName string) []*types100.IPConfig {
	const (
		unnamed = iota
		nameOnly
		inSandbox
		levels
	)
	var byLevel [levels][]*types100.IPConfig
	for _, ip := range res.IPs {
		if ip == nil || ip.Address.IP == nil {
			continue
		}
		if ip.Interface == nil {
			byLevel[unnamed] = append(byLevel[unnamed], ip)
			continue
		}
		i := *ip.Interface
		if i < 0 || i >= len(res.Interfaces) || res.Interfaces[i] == nil || res.Interfaces[i].Name != ifName {
			continue
		}
		if res.Interfaces[i].Sandbox != "" {
			byLevel[inSandbox] = append(byLevel[inSandbox], ip)
		} else {
			byLevel[nameOnly] = append(byLevel[nameOnly], ip)
		}
	}
	for level := inSandbox; level >= unnamed; level-- {
		if len(byLevel[level]) > 0 {
			return byLevel[level]
		}
	}
	return nil
}

// ipv4First formats the addresses, IPv4 before IPv6, each family keeping its
// order.
func ipv4First(ips []*types100.IPConfig) []string {
	var v4, v6 []string
	for _, ip := range ips {
		if ip.Address.IP.To4() != nil {
			v4 = append(v4, ip.Address.IP.String())
		} else {
			v6 = append(v6, ip.Address.IP.String())
		}
	}
	return append(v4, v6...)
}
