package network

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// PortMapping is one host port of a pod, passed to the portmap plugin.
type PortMapping struct {
	HostPort      int32
	ContainerPort int32
	Protocol      string // "tcp", "udp" or "sctp", lowercase
	HostIP        string
}

// Bandwidth limits the traffic of a pod, passed to the bandwidth plugin.
// Rates are in bits per second and bursts in bits. A rate without a burst
// gets an unlimited burst (math.MaxInt32), as the kubelet does.
type Bandwidth struct {
	IngressRate, IngressBurst, EgressRate, EgressBurst int64
}

// DNS is the resolver configuration of a pod, passed as the "dns" capability.
type DNS struct {
	Servers, Searches, Options []string
}

// Pod identifies the sandbox whose network is set up or torn down.
type Pod struct {
	ID        string // full sandbox container ID, used as the CNI container ID
	Name      string
	Namespace string
	UID       string
	// NetNS is the network namespace path of the sandbox, for example
	// /proc/<pid>/ns/net. It may be empty on tear-down when the sandbox is gone.
	NetNS        string
	PortMappings []PortMapping
	Bandwidth    *Bandwidth
	DNS          *DNS
}

// ErrInvalidPod is returned when a Pod lacks a field the operation needs.
var ErrInvalidPod = errors.New("invalid pod")

func (p Pod) validate(needNetNS bool) error {
	if p.ID == "" {
		return fmt.Errorf("%w: ID is empty", ErrInvalidPod)
	}
	if needNetNS && p.NetNS == "" {
		return fmt.Errorf("%w: NetNS is empty", ErrInvalidPod)
	}
	for _, s := range []string{p.Name, p.Namespace, p.UID} {
		if strings.ContainsAny(s, ";=") {
			return fmt.Errorf("%w: %q contains ';' or '=', which CNI_ARGS cannot carry", ErrInvalidPod, s)
		}
	}
	return nil
}

// cniArgs returns the CNI_ARGS the kubelet has always passed to plugins.
func cniArgs(p Pod) [][2]string {
	return [][2]string{
		{"IgnoreUnknown", "1"},
		{"K8S_POD_NAMESPACE", p.Namespace},
		{"K8S_POD_NAME", p.Name},
		{"K8S_POD_INFRA_CONTAINER_ID", p.ID},
		{"K8S_POD_UID", p.UID},
	}
}

// portMappingEntry is the JSON shape of the portMappings capability.
type portMappingEntry struct {
	HostPort      int32  `json:"hostPort"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// bandwidthEntry is the JSON shape of the bandwidth capability.
type bandwidthEntry struct {
	IngressRate  int64 `json:"ingressRate"`
	IngressBurst int64 `json:"ingressBurst"`
	EgressRate   int64 `json:"egressRate"`
	EgressBurst  int64 `json:"egressBurst"`
}

// dnsEntry is the JSON shape of the dns capability.
type dnsEntry struct {
	Servers  []string `json:"servers,omitempty"`
	Searches []string `json:"searches,omitempty"`
	Options  []string `json:"options,omitempty"`
}

// capabilityArgs returns the runtimeConfig capabilities for the pod; libcni
// hands each one only to the plugins that declare it.
func capabilityArgs(p Pod) map[string]interface{} {
	caps := map[string]interface{}{}
	var ports []portMappingEntry
	for _, pm := range p.PortMappings {
		if pm.HostPort <= 0 {
			continue
		}
		proto := strings.ToLower(pm.Protocol)
		if proto == "" {
			proto = "tcp"
		}
		ports = append(ports, portMappingEntry{
			HostPort:      pm.HostPort,
			ContainerPort: pm.ContainerPort,
			Protocol:      proto,
			HostIP:        pm.HostIP,
		})
	}
	if len(ports) > 0 {
		caps["portMappings"] = ports
	}
	if b := p.Bandwidth; b != nil {
		caps["bandwidth"] = bandwidthEntry{
			IngressRate:  b.IngressRate,
			IngressBurst: defaultBurst(b.IngressRate, b.IngressBurst),
			EgressRate:   b.EgressRate,
			EgressBurst:  defaultBurst(b.EgressRate, b.EgressBurst),
		}
	}
	if d := p.DNS; d != nil {
		caps["dns"] = dnsEntry{Servers: d.Servers, Searches: d.Searches, Options: d.Options}
	}
	return caps
}

// defaultBurst gives a rate without a burst an unlimited burst: the
// bandwidth plugin refuses a rate with a zero burst.
func defaultBurst(rate, burst int64) int64 {
	if rate > 0 && burst == 0 {
		return math.MaxInt32
	}
	return burst
}
