//go:build linux

package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestIntegrationDualStack (issue 30 item 10): on a node whose CNI network
// has an IPv4 and an IPv6 range (bridge, host-local), a pod gets one address
// of each family: status.podIP is the IPv4 one (the node's family first),
// status.podIPs both, the downward API's status.podIPs both, and the pod
// answers on its IPv6 address from the host.
func TestIntegrationDualStack(t *testing.T) {
	n := newNode(t)
	v6 := "fd00:e2e:" + n.id[:4] + ":" + n.id[4:] + "::"
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":%q,"plugins":[{"type":"bridge","bridge":%q,"isGateway":true,"ipMasq":false,
  "ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"%s.0/24"}],[{"subnet":"%s/64"}]]}}]}`, cniNetwork, n.bridge, n.ipamDir, n.subnet, v6)
	if err := os.WriteFile(filepath.Join(n.cniConf, "10-e2e.conflist"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	n.start()
	n.writeManifest("dual.yaml", manifest("dual", `  containers:
  - name: web
    image: @IMAGE@
    imagePullPolicy: Never
    command: [sh, -c, "mkdir -p /www && echo \"$POD_IPS\" > /www/ips && exec httpd -f -p 8080 -h /www"]
    env:
    - name: POD_IPS
      valueFrom: {fieldRef: {fieldPath: status.podIPs}}
`))
	p := n.waitPod("dual", podStartTimeout, "running and ready", runningAndReady)
	var ips []string
	for _, ip := range p.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	// Compared as addresses, not text: the pod's IPv6 address is printed
	// without the leading zeros the subnet may have been written with.
	_, v4net, err4 := net.ParseCIDR(n.subnet + ".0/24")
	_, v6net, err6 := net.ParseCIDR(v6 + "/64")
	if err4 != nil || err6 != nil {
		t.Fatalf("test subnets: %v %v", err4, err6)
	}
	if len(ips) != 2 || !v4net.Contains(net.ParseIP(ips[0])) || !v6net.Contains(net.ParseIP(ips[1])) || net.ParseIP(ips[1]).To4() != nil ||
		p.Status.PodIP != ips[0] {
		t.Fatalf("podIP %q podIPs %v, want the IPv4 address of %s.0/24 first, then one of %s/64", p.Status.PodIP, ips, n.subnet, v6)
	}
	url := "http://" + net.JoinHostPort(ips[1], "8080") + "/ips"
	var body string
	deadline := time.Now().Add(30 * time.Second) // the address's duplicate detection takes a moment
	for {
		resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			body = strings.TrimSpace(string(b))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if want := strings.Join(ips, ","); body != want {
		t.Errorf("downward API status.podIPs = %q, want %q", body, want)
	}
}
