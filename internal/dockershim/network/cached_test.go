package network

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCachedIPs reads cache files in the shape libcni writes for
// cri-dockerd (network 0.4.0 and 1.0.0 results, plus its loopback entry
// under eth0), with the real libcni.
func TestCachedIPs(t *testing.T) {
	cache := t.TempDir()
	m, err := New(Options{ConfDir: t.TempDir(), BinDirs: []string{t.TempDir()}, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	const (
		idA = "aaaa000000000000000000000000000000000000000000000000000000000001"
		idB = "bbbb000000000000000000000000000000000000000000000000000000000002"
		idC = "cccc000000000000000000000000000000000000000000000000000000000003"
	)
	write := func(network, id, version, result string) {
		conf := `{"cniVersion":"` + version + `","name":"` + network + `","plugins":[{"type":"bridge"}]}`
		body := `{"kind":"cniCacheV1","containerId":"` + id + `","config":"` + base64.StdEncoding.EncodeToString([]byte(conf)) +
			`","ifName":"eth0","networkName":"` + network + `","cniArgs":[["K8S_POD_NAME","p"]],"capabilityArgs":{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]},"result":` + result + `}`
		dir := filepath.Join(cache, "results")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, network+"-"+id+"-eth0"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("cni-loopback", idA, "0.2.0", `{"cniVersion":"0.2.0","ip4":{"ip":"127.0.0.1/8"}}`)
	write("k8s-pod-network", idA, "0.4.0", `{"cniVersion":"0.4.0","interfaces":[{"name":"cni0"},{"name":"veth1"},{"name":"eth0","sandbox":"/proc/1/ns/net"}],"ips":[{"version":"6","interface":2,"address":"fd00::5/64"},{"version":"4","interface":2,"address":"10.22.0.5/16","gateway":"10.22.0.1"}]}`)
	write("k8s-pod-network", idB, "1.0.0", `{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"/x"}],"ips":[{"interface":0,"address":"10.22.0.6/16"}]}`)
	write("k8s-pod-network", idC, "1.0.0", `{"cniVersion":"1.0.0"}`)

	ctx := context.Background()
	for id, want := range map[string][]string{idA: {"10.22.0.5", "fd00::5"}, idB: {"10.22.0.6"}} {
		got, err := m.CachedIPs(ctx, id)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("CachedIPs(%.4s) = %v, %v; want %v", id, got, err, want)
		}
	}
	if _, err := m.CachedIPs(ctx, idC); err == nil || !strings.Contains(err.Error(), "names no IP") {
		t.Errorf("a result without IPs: %v", err)
	}
	if _, err := m.CachedIPs(ctx, strings.Repeat("d", 64)); err == nil {
		t.Error("no cache entry gave no error")
	}
	if _, err := m.CachedIPs(ctx, "../results"); err == nil {
		t.Error("a path in the ID was accepted")
	}
}
