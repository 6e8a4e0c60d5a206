package options

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// The pflag.Values below give flags upstream's types (the type name --help
// shows) and syntaxes.

// ipFlag is an IP address flag over a string field (type "ip").
type ipFlag struct{ ip *string }

func (f *ipFlag) String() string { return *f.ip }
func (f *ipFlag) Type() string   { return "ip" }
func (f *ipFlag) Set(s string) error {
	if net.ParseIP(strings.TrimSpace(s)) == nil {
		return fmt.Errorf("%q is not a valid IP address", s)
	}
	*f.ip = strings.TrimSpace(s)
	return nil
}

// taintsFlag is --register-with-taints: comma separated key=value:Effect.
type taintsFlag struct{ taints *[]v1.Taint }

func (f *taintsFlag) Type() string { return "[]v1.Taint" }
func (f *taintsFlag) String() string {
	parts := make([]string, 0, len(*f.taints))
	for _, t := range *f.taints {
		parts = append(parts, t.ToString())
	}
	return strings.Join(parts, ",")
}
func (f *taintsFlag) Set(s string) error {
	taints, err := ParseTaints(s)
	if err != nil {
		return err
	}
	*f.taints = taints
	return nil
}

// reservedMemoryFlag is --reserved-memory: "NUMA:name=quantity,..." per NUMA
// node; the flag repeats, or nodes are separated by ';'.
type reservedMemoryFlag struct {
	reservations *[]kubeletv1beta1.MemoryReservation
	set          bool
}

func (f *reservedMemoryFlag) Type() string { return "reserved-memory" }
func (f *reservedMemoryFlag) String() string {
	var parts []string
	for _, r := range *f.reservations {
		var kv []string
		for name, q := range r.Limits {
			kv = append(kv, string(name)+"="+q.String())
		}
		parts = append(parts, fmt.Sprintf("%d:%s", r.NumaNode, strings.Join(kv, ",")))
	}
	return strings.Join(parts, ";")
}
func (f *reservedMemoryFlag) Set(s string) error {
	if !f.set {
		*f.reservations = nil // the flag replaces the config file's list
		f.set = true
	}
	for _, node := range strings.Split(s, ";") {
		node = strings.TrimSpace(node)
		if node == "" {
			continue
		}
		numa, limits, ok := strings.Cut(node, ":")
		if !ok {
			return fmt.Errorf("the reserved memory has incorrect format, expected numaNodeID:type=quantity[,type=quantity...], got %s", node)
		}
		id, err := strconv.ParseInt(strings.TrimSpace(numa), 10, 32)
		if err != nil {
			return fmt.Errorf("failed to parse the NUMA node ID %q: %w", numa, err)
		}
		r := kubeletv1beta1.MemoryReservation{NumaNode: int32(id), Limits: v1.ResourceList{}}
		for _, kv := range strings.Split(limits, ",") {
			name, value, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || name == "" {
				return fmt.Errorf("the reserved limit has incorrect value, expected type=quantity, got %s", kv)
			}
			q, err := resource.ParseQuantity(value)
			if err != nil {
				return fmt.Errorf("failed to parse the quantity %q of %s: %w", value, name, err)
			}
			r.Limits[v1.ResourceName(name)] = q
		}
		*f.reservations = append(*f.reservations, r)
	}
	return nil
}

// versionFlag is --version: "true" prints the version and exits, "raw" prints
// it in full, "vX.Y.Z..." sets the version this kubelet reports.
type versionFlag struct{ cfg *Config }

func (f *versionFlag) Type() string   { return "version" }
func (f *versionFlag) String() string { return f.cfg.ShowVersion }
func (f *versionFlag) Set(s string) error {
	switch s {
	case "false":
		f.cfg.ShowVersion = ""
	case "true", "raw":
		f.cfg.ShowVersion = s
	default:
		if !strings.HasPrefix(s, "v") || len(s) < 2 {
			return fmt.Errorf("invalid --version value %q: want true, false, raw or a version vX.Y.Z", s)
		}
		f.cfg.ReportedVersion = s
		f.cfg.ShowVersion = ""
	}
	return nil
}
