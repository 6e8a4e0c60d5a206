package nodestatus

import (
	"errors"
	"fmt"
	"net"

	v1 "k8s.io/api/core/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// nodeAddresses returns the node's InternalIP address(es) followed by its
// Hostname address, as upstream's NodeAddress setter:
//
//  1. the NodeIPs given (--node-ip), each of which must be on a local interface;
//  2. else the hostname, if it is an IP;
//  3. else the first usable address NodeName resolves to (preferred family first);
//  4. else the IP of the default-route interface.
//
// The preferred family is IPv4 unless NodeIPs[0] is "::". Unlike upstream, a
// loopback NodeIP is accepted (single-host clusters); detection never picks one.
func (c *Controller) nodeAddresses() ([]v1.NodeAddress, error) {
	var primary, secondary net.IP
	if len(c.opts.NodeIPs) > 0 {
		primary = c.opts.NodeIPs[0]
	}
	if len(c.opts.NodeIPs) > 1 {
		secondary = c.opts.NodeIPs[1]
	}
	hostname := v1.NodeAddress{Type: v1.NodeHostName, Address: c.opts.Hostname}
	if primary != nil && !primary.IsUnspecified() {
		ips := []net.IP{primary}
		if secondary != nil && !secondary.IsUnspecified() {
			ips = append(ips, secondary)
		}
		out := make([]v1.NodeAddress, 0, len(ips)+1)
		for _, ip := range ips {
			if err := c.localIP(ip); err != nil {
				return nil, fmt.Errorf("failed to validate nodeIP: %w", err)
			}
			out = append(out, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip.String()})
		}
		return append(out, hostname), nil
	}
	ip, err := c.detectNodeIP(primary)
	if err != nil {
		return nil, fmt.Errorf("can't get ip address of node %s. error: %w", c.opts.NodeName, err)
	}
	return []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip.String()}, hostname}, nil
}

// DetectNodeIP is the address upstream's kubelet gives a node that has no
// --node-ip, as nodeAddresses finds it: the node name as an IP, else the
// first usable address the name resolves to (IPv4 preferred), else the
// global address of the default-route interface.
func DetectNodeIP(nodeName string) (net.IP, error) {
	c := &Controller{opts: Options{NodeName: nodeName, Hostname: nodeName},
		lookupIP: net.LookupIP, defaultRouteIP: defaultRouteIP, localIP: onLocalInterface}
	return c.detectNodeIP(nil)
}

// detectNodeIP runs steps 2-4 of nodeAddresses; family is nil or unspecified.
func (c *Controller) detectNodeIP(family net.IP) (net.IP, error) {
	if ip := net.ParseIP(c.opts.Hostname); ip != nil {
		return ip, nil
	}
	preferIPv4 := family == nil || family.To4() != nil
	var found net.IP
	var lastErr error
	addrs, _ := c.lookupIP(c.opts.NodeName)
	for _, addr := range addrs {
		if lastErr = c.usableDetectedIP(addr); lastErr != nil {
			continue
		}
		if (addr.To4() != nil) == preferIPv4 {
			return addr, nil
		}
		if found == nil {
			found = addr
		}
	}
	if found != nil {
		return found, nil
	}
	ip, err := c.defaultRouteIP(family)
	if err != nil {
		return nil, errors.Join(lastErr, err)
	}
	if ip == nil {
		return nil, errors.New("no default-route interface address")
	}
	return ip, nil
}

// usableDetectedIP is upstream's validateNodeIP: no loopback, multicast,
// link-local or unspecified address, and the address is on a local interface.
func (c *Controller) usableDetectedIP(ip net.IP) error {
	switch {
	case ip.To16() == nil:
		return errors.New("nodeIP must be a valid IP address")
	case ip.IsLoopback():
		return errors.New("nodeIP can't be loopback address")
	case ip.IsMulticast():
		return errors.New("nodeIP can't be a multicast address")
	case ip.IsLinkLocalUnicast():
		return errors.New("nodeIP can't be a link-local unicast address")
	case ip.IsUnspecified():
		return errors.New("nodeIP can't be an all zeros address")
	}
	return c.localIP(ip)
}

// onLocalInterface fails unless ip is assigned to one of this host's interfaces.
func onLocalInterface(ip net.IP) error {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return fmt.Errorf("list interface addresses: %w", err)
	}
	for _, a := range addrs {
		var have net.IP
		switch v := a.(type) {
		case *net.IPNet:
			have = v.IP
		case *net.IPAddr:
			have = v.IP
		}
		if have != nil && have.Equal(ip) {
			return nil
		}
	}
	return fmt.Errorf("node IP: %q not found in the host's network interfaces", ip.String())
}

// defaultRouteIP is the global address of the default-route interface of the
// family of family (IPv4 when nil).
func defaultRouteIP(family net.IP) (net.IP, error) {
	return utilnet.ResolveBindAddress(family)
}
