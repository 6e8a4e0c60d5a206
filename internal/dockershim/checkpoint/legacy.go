package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"strconv"
	"strings"
)

// Origin names the runtime that wrote a foreign sandbox checkpoint.
type Origin string

const (
	// OriginCRIDockerd is cri-dockerd (checkpoints in <its root>/sandbox,
	// /var/lib/cri-dockerd/sandbox by default).
	OriginCRIDockerd Origin = "cri-dockerd"
	// OriginDockershim123 is the dockershim built into kubelet 1.23
	// (checkpoints in /var/lib/dockershim/sandbox). Older kubelets wrote the
	// same format once port mappings had a host_ip; checked against 1.23's.
	OriginDockershim123 Origin = "dockershim (kubelet 1.23)"
)

// Legacy is what a sandbox checkpoint of cri-dockerd or of the in-tree
// dockershim holds: no UID, no IPs, no creation time.
type Legacy struct {
	Origin       Origin
	Name         string
	Namespace    string
	HostNetwork  bool
	PortMappings []PortMapping
}

// legacyFile is their on-disk format, the same JSON for both: the checksum
// is a number and covers the data alone.
type legacyFile struct {
	Version   string     `json:"version"`
	Name      string     `json:"name"`
	Namespace string     `json:"namespace"`
	Data      legacyData `json:"data"`
	Checksum  *uint64    `json:"checksum"`
}

type legacyData struct {
	PortMappings []*legacyPortMapping `json:"port_mappings,omitempty"`
	HostNetwork  bool                 `json:"host_network,omitempty"`
}

type legacyPortMapping struct {
	Protocol      *string `json:"protocol,omitempty"`
	ContainerPort *int32  `json:"container_port,omitempty"`
	HostPort      *int32  `json:"host_port,omitempty"`
	HostIP        string  `json:"host_ip,omitempty"`
}

// legacyTypeNames are the Go type names each writer's checksum dump prints:
// the data struct, the port mapping and the protocol.
var legacyTypeNames = []struct {
	origin                  Origin
	data, mapping, protocol string
}{
	{OriginCRIDockerd, "core.CheckpointData", "config.PortMapping", "config.Protocol"},
	{OriginDockershim123, "dockershim.CheckpointData", "dockershim.PortMapping", "dockershim.Protocol"},
}

// ReadLegacy reads the sandbox checkpoint at path in the format of
// cri-dockerd or of kubelet 1.23's dockershim and tells which wrote it. It
// returns an error wrapping ErrNotFound when there is no file and one
// wrapping ErrCorrupt when the file is not such a checkpoint, its checksum
// matches neither writer, or a value is out of range. The file is never
// changed.
func ReadLegacy(path string) (*Legacy, error) {
	content, err := readFile(path, path)
	if err != nil {
		return nil, err
	}
	l, err := decodeLegacy(content)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w: %w", path, ErrCorrupt, err)
	}
	return l, nil
}

// decodeLegacy parses, verifies and converts a foreign checkpoint.
func decodeLegacy(content []byte) (*Legacy, error) {
	if len(content) > maxFileSize {
		return nil, fmt.Errorf("file larger than %d bytes", maxFileSize)
	}
	var lf legacyFile
	if err := json.Unmarshal(content, &lf); err != nil {
		return nil, fmt.Errorf("decode file: %w", err)
	}
	if lf.Version != Version {
		return nil, fmt.Errorf("unsupported version %q", lf.Version)
	}
	if lf.Checksum == nil {
		return nil, errors.New("no checksum")
	}
	origin, ok := Origin(""), false
	for _, names := range legacyTypeNames {
		if legacyChecksum(&lf.Data, names.data, names.mapping, names.protocol) == *lf.Checksum {
			origin, ok = names.origin, true
			break
		}
	}
	if !ok {
		return nil, fmt.Errorf("checksum %d matches neither cri-dockerd's nor the 1.23 dockershim's", *lf.Checksum)
	}
	l := &Legacy{Origin: origin, Name: lf.Name, Namespace: lf.Namespace, HostNetwork: lf.Data.HostNetwork}
	for i, pm := range lf.Data.PortMappings {
		m, err := pm.convert()
		if err != nil {
			return nil, fmt.Errorf("port_mappings[%d]: %w", i, err)
		}
		l.PortMappings = append(l.PortMappings, m)
	}
	return l, nil
}

// convert checks a foreign port mapping and returns this package's form
// (the protocol lower case, as the shim writes it and CNI takes it).
func (pm *legacyPortMapping) convert() (PortMapping, error) {
	if pm == nil || pm.Protocol == nil || pm.ContainerPort == nil || pm.HostPort == nil {
		return PortMapping{}, errors.New("protocol, container_port and host_port are required")
	}
	proto := strings.ToLower(*pm.Protocol)
	switch proto {
	case "tcp", "udp", "sctp":
	default:
		return PortMapping{}, fmt.Errorf("protocol %q is not tcp, udp or sctp", *pm.Protocol)
	}
	for _, p := range []int32{*pm.ContainerPort, *pm.HostPort} {
		if p < 0 || p > 65535 {
			return PortMapping{}, fmt.Errorf("port %d is out of range", p)
		}
	}
	if pm.HostIP != "" {
		if _, err := netip.ParseAddr(pm.HostIP); err != nil {
			return PortMapping{}, fmt.Errorf("host_ip: %w", err)
		}
	}
	return PortMapping{Protocol: proto, ContainerPort: *pm.ContainerPort, HostPort: *pm.HostPort, HostIP: pm.HostIP}, nil
}

// legacyChecksum is the writers' checksum: FNV-1a (32 bits) of go-spew's
// "%#v" dump of the data value (sorted keys, methods disabled), whose text
// names the writer's Go types. The dump is rebuilt here for the two shapes
// the data can take, so that no reflection-based printer is needed.
func legacyChecksum(d *legacyData, dataType, mappingType, protocolType string) uint64 {
	var b strings.Builder
	b.WriteString("(" + dataType + "){PortMappings:([]*" + mappingType + ")")
	if d.PortMappings == nil {
		b.WriteString("<nil>")
	} else {
		b.WriteString("[")
		for i, pm := range d.PortMappings {
			if i > 0 {
				b.WriteString(" ")
			}
			if pm == nil {
				b.WriteString("<nil>")
				continue
			}
			b.WriteString("<*>{Protocol:(*" + protocolType + ")")
			b.WriteString(spewPtr(pm.Protocol, func(s string) string { return s }))
			b.WriteString(" ContainerPort:(*int32)" + spewPtr(pm.ContainerPort, formatInt32))
			b.WriteString(" HostPort:(*int32)" + spewPtr(pm.HostPort, formatInt32))
			b.WriteString(" HostIP:(string)" + pm.HostIP + "}")
		}
		b.WriteString("]")
	}
	b.WriteString(" HostNetwork:(bool)" + strconv.FormatBool(d.HostNetwork) + "}")
	h := fnv.New32a()
	_, _ = h.Write([]byte(b.String()))
	return uint64(h.Sum32())
}

func formatInt32(v int32) string { return strconv.FormatInt(int64(v), 10) }

// spewPtr prints a pointer field's value the way the dump does: the value,
// or <nil>.
func spewPtr[T any](p *T, format func(T) string) string {
	if p == nil {
		return "<nil>"
	}
	return format(*p)
}
