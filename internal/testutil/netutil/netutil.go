// Package netutil holds network helpers of the test fixtures. Tests only.
package netutil

import (
	"fmt"
	"math/rand/v2"
	"net"
)

// FreeSubnet picks a random 10.<base+0..9>.y.0/24 that no address of the host
// is in (each fixture has a base of its own, so fixtures do not collide).
func FreeSubnet(base int) (*net.IPNet, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("host addresses: %w", err)
	}
	for range 100 {
		_, subnet, _ := net.ParseCIDR(fmt.Sprintf("10.%d.%d.0/24", base+rand.IntN(10), rand.IntN(256)))
		if !inUse(subnet, addrs) {
			return subnet, nil
		}
	}
	return nil, fmt.Errorf("no free 10.%d-%d.y.0/24", base, base+9)
}

func inUse(subnet *net.IPNet, addrs []net.Addr) bool {
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && (subnet.Contains(ipn.IP) || ipn.Contains(subnet.IP)) {
			return true
		}
	}
	return false
}
