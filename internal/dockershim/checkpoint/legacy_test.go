package checkpoint

import (
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// The checksums below were produced by the writers' own code: cri-dockerd
// v0.4.3's core.NewPodSandboxCheckpoint(...).MarshalCheckpoint(), and go-spew
// v1.1.1 over structs of the 1.23 dockershim's shape in a package named
// dockershim (its type names are part of the hashed text).
func TestReadLegacy(t *testing.T) {
	ports := []PortMapping{{Protocol: "tcp", ContainerPort: 80, HostPort: 8080}}
	two := []PortMapping{{Protocol: "tcp", ContainerPort: 80, HostPort: 8080, HostIP: "127.0.0.1"}, {Protocol: "udp", ContainerPort: 53}}
	twoJSON := `"port_mappings":[{"protocol":"tcp","container_port":80,"host_port":8080,"host_ip":"127.0.0.1"},{"protocol":"udp","container_port":53,"host_port":0}]`
	for _, tc := range []struct {
		name, file string
		want       *Legacy
	}{
		{"cri-dockerd ports", `{"version":"v1","name":"web-0","namespace":"default","data":{"port_mappings":[{"protocol":"tcp","container_port":80,"host_port":8080}]},"checksum":3712672205}`,
			&Legacy{Origin: OriginCRIDockerd, Name: "web-0", Namespace: "default", PortMappings: ports}},
		{"cri-dockerd empty", `{"version":"v1","name":"p","namespace":"kube-system","data":{},"checksum":2305795928}`,
			&Legacy{Origin: OriginCRIDockerd, Name: "p", Namespace: "kube-system"}},
		{"cri-dockerd host network", `{"version":"v1","name":"p","namespace":"n","data":{"host_network":true},"checksum":12315789}`,
			&Legacy{Origin: OriginCRIDockerd, Name: "p", Namespace: "n", HostNetwork: true}},
		{"cri-dockerd two ports", `{"version":"v1","name":"p","namespace":"n","data":{` + twoJSON + `},"checksum":2195515454}`,
			&Legacy{Origin: OriginCRIDockerd, Name: "p", Namespace: "n", PortMappings: two}},
		{"1.23 ports", `{"version":"v1","name":"web-0","namespace":"default","data":{"port_mappings":[{"protocol":"tcp","container_port":80,"host_port":8080}]},"checksum":928727533}`,
			&Legacy{Origin: OriginDockershim123, Name: "web-0", Namespace: "default", PortMappings: ports}},
		{"1.23 empty", `{"version":"v1","name":"p","namespace":"n","data":{},"checksum":815459779}`,
			&Legacy{Origin: OriginDockershim123, Name: "p", Namespace: "n"}},
		{"1.23 host network", `{"version":"v1","name":"p","namespace":"n","data":{"host_network":true},"checksum":996107268}`,
			&Legacy{Origin: OriginDockershim123, Name: "p", Namespace: "n", HostNetwork: true}},
		{"1.23 two ports, host network", `{"version":"v1","name":"p","namespace":"n","data":{` + twoJSON + `,"host_network":true},"checksum":3843261714}`,
			&Legacy{Origin: OriginDockershim123, Name: "p", Namespace: "n", HostNetwork: true, PortMappings: two}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "abc")
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := ReadLegacy(path)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if b, _ := os.ReadFile(path); string(b) != tc.file {
				t.Error("ReadLegacy changed the file")
			}
		})
	}
}

func TestReadLegacyRejects(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadLegacy(filepath.Join(dir, "missing")); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing file: %v, want ErrNotFound", err)
	}
	for name, file := range map[string]string{
		"tampered":       `{"version":"v1","name":"p","namespace":"n","data":{"host_network":true},"checksum":2305795928}`,
		"no checksum":    `{"version":"v1","name":"p","namespace":"n","data":{}}`,
		"version":        `{"version":"v2","name":"p","namespace":"n","data":{},"checksum":2305795928}`,
		"ours":           `{"version":"v1","data":{"id":"abc"},"checksum":"00"}`,
		"not json":       `garbage`,
		"bad protocol":   `{"version":"v1","name":"p","namespace":"n","data":{"port_mappings":[{"protocol":"icmp","container_port":80,"host_port":8080}]},"checksum":0}`,
		"missing fields": `{"version":"v1","name":"p","namespace":"n","data":{"port_mappings":[{"protocol":"tcp"}]},"checksum":0}`,
	} {
		path := filepath.Join(dir, "f")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadLegacy(path); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// A field value the checksum covers but that is out of range is refused even
// with a matching checksum.
func TestReadLegacyOutOfRange(t *testing.T) {
	d := legacyData{PortMappings: []*legacyPortMapping{{Protocol: ptr("tcp"), ContainerPort: ptr(int32(80)), HostPort: ptr(int32(70000))}}}
	sum := legacyChecksum(&d, "core.CheckpointData", "config.PortMapping", "config.Protocol")
	_, err := decodeLegacy([]byte(`{"version":"v1","name":"p","namespace":"n","data":{"port_mappings":[{"protocol":"tcp","container_port":80,"host_port":70000}]},"checksum":` +
		strconv.FormatUint(sum, 10) + `}`))
	if err == nil || !strings.Contains(err.Error(), "port 70000 is out of range") {
		t.Errorf("host_port 70000: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// FuzzReadLegacy: any file in cri-dockerd's (or the 1.23 dockershim's)
// sandbox checkpoint directory is read or refused with ErrCorrupt, never a
// panic, and never changed; what is read comes from one of the two writers
// and holds only valid port mappings. Each input is also tried resealed with
// each writer's checksum, so that the fuzzer gets past the checksum: then it
// is read as that writer's, unless a port mapping is refused.
func FuzzReadLegacy(f *testing.F) {
	for _, seed := range []string{
		`{"version":"v1","name":"web-0","namespace":"default","data":{"port_mappings":[{"protocol":"tcp","container_port":80,"host_port":8080}]},"checksum":3712672205}`,
		`{"version":"v1","name":"p","namespace":"n","data":{"port_mappings":[{"protocol":"tcp","container_port":80,"host_port":8080,"host_ip":"127.0.0.1"},{"protocol":"udp","container_port":53,"host_port":0}],"host_network":true},"checksum":3843261714}`,
		`{"version":"v1","name":"p","namespace":"kube-system","data":{},"checksum":2305795928}`,
		`{"version":"v1","name":"p","namespace":"n","data":{"port_mappings":[null,{"protocol":"SCTP","container_port":-1,"host_port":65536,"host_ip":"::1%eth0"}]},"checksum":0}`,
		`{"version":"v1","name":"../p","namespace":"n","data":{"port_mappings":[{"protocol":"","host_ip":"not an ip"}]},"checksum":1}`,
		`{"version":"v1","data":{"id":"abc"},"checksum":"00"}`,
		`{"version":"v2","data":null}`, `null`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	path := filepath.Join(f.TempDir(), "abc")
	f.Fuzz(func(t *testing.T, content []byte) {
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := ReadLegacy(path)
		switch {
		case err != nil && (l != nil || !errors.Is(err, ErrCorrupt)):
			t.Fatalf("ReadLegacy = %+v, %v; want nothing and ErrCorrupt", l, err)
		case err == nil:
			checkLegacy(t, l)
		}
		if b, _ := os.ReadFile(path); string(b) != string(content) {
			t.Fatal("ReadLegacy changed the file")
		}

		var lf legacyFile
		if json.Unmarshal(content, &lf) != nil || lf.Version != Version {
			return
		}
		if len(lf.Data.PortMappings) == 0 {
			lf.Data.PortMappings = nil // as written: omitempty leaves an empty list out
		}
		for _, names := range legacyTypeNames {
			sum := legacyChecksum(&lf.Data, names.data, names.mapping, names.protocol)
			lf.Checksum = &sum
			resealed, err := json.Marshal(lf)
			if err != nil {
				t.Fatal(err)
			}
			l, err := decodeLegacy(resealed)
			if err != nil {
				if !strings.Contains(err.Error(), "port_mappings[") {
					t.Fatalf("resealed as %s's: %s: %v", names.origin, resealed, err)
				}
				continue
			}
			checkLegacy(t, l)
			if l.Name != lf.Name || l.Namespace != lf.Namespace || l.HostNetwork != lf.Data.HostNetwork || len(l.PortMappings) != len(lf.Data.PortMappings) {
				t.Fatalf("resealed as %s's: %s read as %+v", names.origin, resealed, l)
			}
		}
	})
}

// checkLegacy fails t unless l comes from a known writer and its port
// mappings are valid.
func checkLegacy(t *testing.T, l *Legacy) {
	t.Helper()
	if l == nil || (l.Origin != OriginCRIDockerd && l.Origin != OriginDockershim123) {
		t.Fatalf("read %+v without a known origin", l)
	}
	for _, pm := range l.PortMappings {
		valid := pm.Protocol == "tcp" || pm.Protocol == "udp" || pm.Protocol == "sctp"
		for _, p := range []int32{pm.ContainerPort, pm.HostPort} {
			valid = valid && p >= 0 && p <= 65535
		}
		if _, err := netip.ParseAddr(pm.HostIP); pm.HostIP != "" && err != nil {
			valid = false
		}
		if !valid {
			t.Fatalf("port mapping %+v read", pm)
		}
	}
}
