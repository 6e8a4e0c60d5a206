package container

import "net"

// SortPodIPs returns the first pod IP of the node IP's family and then the first
// of the other family (upstream sortPodIPs); IPv4 is primary without a node IP.
func SortPodIPs(nodeIP net.IP, ips []string) []string {
	primaryV4 := nodeIP == nil || nodeIP.To4() != nil
	var out []string
	for _, wantV4 := range []bool{primaryV4, !primaryV4} {
		for _, s := range ips {
			ip := net.ParseIP(s)
			if ip != nil && (ip.To4() != nil) == wantV4 {
				out = append(out, ip.String())
				break
			}
		}
	}
	return out
}
