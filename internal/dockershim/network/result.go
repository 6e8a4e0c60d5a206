package network

import (
	"fmt"

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
	return &Result{IPs: interfaceIPs(cur, ifName), Interface: ifName}, nil
}

// interfaceIPs returns the addresses the result assigns to the sandbox
// interface ifName, IPv4 first. The best match wins: IPs on an interface
// named ifName inside a sandbox, else on any interface named ifName, else IPs
// that name no interface at all (as an IPAM-only chain reports them).
func interfaceIPs(res *types100.Result, ifName string) []string {
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
			return ipv4First(byLevel[level])
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
