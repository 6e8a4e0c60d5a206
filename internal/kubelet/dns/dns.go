// Package dns builds the DNS configuration of a pod's sandbox (the CRI DNSConfig: name
// servers, search domains and resolver options) from the pod's dnsPolicy and dnsConfig,
// the kubelet's cluster DNS settings and the host's resolv.conf, the way the upstream
// kubelet's pkg/kubelet/network/dns does.
//
// Only the kubelet coordinator (internal/kubelet) may import it. It imports no other
// package of this project.
package dns

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Limits applied to the composed configuration (upstream's expanded DNS config limits).
const (
	// MaxDNSSearchPaths is the largest number of search domains passed to the runtime.
	MaxDNSSearchPaths = 32
	// MaxDNSSearchListChars is the longest search line (domains joined by spaces).
	MaxDNSSearchListChars = 2048
	// MaxDNSNameservers is the largest number of name servers passed to the runtime.
	MaxDNSNameservers = 3
	// maxDomainLength is the longest single search domain (a DNS-1123 subdomain);
	// longer ones make some resolvers (glibc 2.28) abort.
	maxDomainLength = 253
	// maxResolvConfBytes bounds how much of the host resolv.conf is read.
	maxResolvConfBytes = 10 << 20
)

// defaultOptions are the resolver options of ClusterFirst pods.
var defaultOptions = []string{"ndots:5"}

// Event reasons recorded through Options.Recorder (upstream's).
const (
	ReasonMissingClusterDNS = "MissingClusterDNS"
	ReasonDNSConfigForming  = "DNSConfigForming"
)

// Options configures a Configurer.
type Options struct {
	// ClusterDNS are the cluster DNS servers (--cluster-dns). Empty: ClusterFirst pods
	// fall back to the Default policy with a warning.
	ClusterDNS []net.IP
	// ClusterDomain is the cluster's DNS domain (--cluster-domain), e.g. "cluster.local".
	ClusterDomain string
	// ResolvConf is the host resolv.conf used as the base (--resolv-conf); "" = none, in
	// which case Default pods get 127.0.0.1 (::1 on IPv6-only nodes) and search ".".
	ResolvConf string
	// NodeIPs decide between 127.0.0.1 and ::1 when ResolvConf is ""; optional.
	NodeIPs []net.IP
	// Logger receives warnings; nil = no logging.
	Logger *zap.Logger
	// Recorder, if set, receives pod events (MissingClusterDNS, DNSConfigForming).
	Recorder record.EventRecorder
}

// Configurer computes pod DNS configurations. It is safe for concurrent use: it keeps no
// mutable state and reads the host resolv.conf on every call (so edits are picked up).
type Configurer struct {
	clusterDNS    []net.IP
	clusterDomain string
	resolvConf    string
	nodeIPs       []net.IP
	logger        *zap.Logger
	recorder      record.EventRecorder
}

// NewConfigurer returns a Configurer for opts. It does no I/O.
func NewConfigurer(opts Options) *Configurer {
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Configurer{
		clusterDNS:    append([]net.IP(nil), opts.ClusterDNS...),
		clusterDomain: opts.ClusterDomain,
		resolvConf:    opts.ResolvConf,
		nodeIPs:       append([]net.IP(nil), opts.NodeIPs...),
		logger:        logger.Named("dns"),
		recorder:      opts.Recorder,
	}
}

// ClusterDomain returns the configured cluster domain.
func (c *Configurer) ClusterDomain() string { return c.clusterDomain }

type podDNSType int

const (
	podDNSCluster podDNSType = iota
	podDNSHost
	podDNSNone
)

// podDNSTypeOf maps a pod's dnsPolicy to the base configuration it starts from.
// ClusterFirst on a host-network pod means Default; an unknown policy is an error
// (callers fall back to ClusterFirst, as upstream does).
func podDNSTypeOf(pod *v1.Pod) (podDNSType, error) {
	switch pod.Spec.DNSPolicy {
	case v1.DNSNone:
		return podDNSNone, nil
	case v1.DNSClusterFirstWithHostNet:
		return podDNSCluster, nil
	case v1.DNSClusterFirst:
		if pod.Spec.HostNetwork {
			return podDNSHost, nil
		}
		return podDNSCluster, nil
	case v1.DNSDefault:
		return podDNSHost, nil
	}
	return podDNSCluster, fmt.Errorf("invalid DNSPolicy=%q", pod.Spec.DNSPolicy)
}

// GetPodDNS returns the DNS configuration of pod's sandbox.
//
// Steps: read the host resolv.conf (if configured); pick the base by dnsPolicy (None:
// empty; ClusterFirst: the cluster servers, the cluster search domains before the
// host's, ndots:5; Default: the host's); append spec.dnsConfig; apply the limits.
func (c *Configurer) GetPodDNS(pod *v1.Pod) (*runtimeapi.DNSConfig, error) {
	cfg, err := c.hostDNSConfig()
	if err != nil {
		return nil, err
	}
	dnsType, err := podDNSTypeOf(pod)
	if err != nil {
		c.logger.Error("Bad DNS policy, falling back to ClusterFirst",
			zap.String("pod", podName(pod)), zap.Error(err))
		dnsType = podDNSCluster
	}
	if dnsType == podDNSCluster && len(c.clusterDNS) == 0 {
		msg := fmt.Sprintf("kubelet does not have ClusterDNS IP configured and cannot create Pod using %q policy. Falling back to %q policy.",
			v1.DNSClusterFirst, v1.DNSDefault)
		c.logger.Warn(msg, zap.String("pod", podName(pod)))
		c.event(pod, ReasonMissingClusterDNS, fmt.Sprintf("pod: %q. %s", podName(pod), msg))
		dnsType = podDNSHost
	}
	switch dnsType {
	case podDNSNone:
		cfg = &runtimeapi.DNSConfig{}
	case podDNSCluster:
		cfg.Servers = make([]string, 0, len(c.clusterDNS))
		for _, ip := range c.clusterDNS {
			cfg.Servers = append(cfg.Servers, ip.String())
		}
		cfg.Searches = c.clusterSearches(cfg.Searches, pod.Namespace)
		cfg.Options = append([]string(nil), defaultOptions...)
	case podDNSHost:
		if c.resolvConf == "" {
			cfg.Servers = c.localServers()
			cfg.Searches = []string{"."}
		}
	}
	if pod.Spec.DNSConfig != nil {
		appendPodDNSConfig(cfg, pod.Spec.DNSConfig)
	}
	c.fitLimits(cfg, pod)
	return cfg, nil
}

// hostDNSConfig returns the servers, searches and options of the host resolv.conf,
// or an empty configuration when none is configured.
func (c *Configurer) hostDNSConfig() (*runtimeapi.DNSConfig, error) {
	if c.resolvConf == "" {
		return &runtimeapi.DNSConfig{}, nil
	}
	data, err := readAtMost(c.resolvConf, maxResolvConfBytes)
	if err != nil {
		return nil, fmt.Errorf("read resolv.conf %q: %w", c.resolvConf, err)
	}
	rc, err := ParseResolvConf(data)
	if err != nil {
		return nil, fmt.Errorf("parse resolv.conf %q: %w", c.resolvConf, err)
	}
	return &runtimeapi.DNSConfig{Servers: rc.Nameservers, Searches: rc.Searches, Options: rc.Options}, nil
}

// clusterSearches puts <ns>.svc.<domain>, svc.<domain>, <domain> before the host's
// search domains (without duplicates). With no cluster domain, the host's are kept.
func (c *Configurer) clusterSearches(hostSearches []string, namespace string) []string {
	if c.clusterDomain == "" {
		return hostSearches
	}
	cluster := []string{
		namespace + ".svc." + c.clusterDomain,
		"svc." + c.clusterDomain,
		c.clusterDomain,
	}
	return omitDuplicates(append(cluster, hostSearches...))
}

// localServers is the "use the local machine" server list used when there is no host
// resolv.conf: ::1 for IPv6 node IPs, 127.0.0.1 otherwise.
func (c *Configurer) localServers() []string {
	var servers []string
	for _, ip := range c.nodeIPs {
		if ip.To4() == nil {
			servers = append(servers, "::1")
		} else {
			servers = append(servers, "127.0.0.1")
		}
	}
	servers = omitDuplicates(servers)
	if len(servers) == 0 {
		servers = []string{"127.0.0.1"}
	}
	return servers
}

// appendPodDNSConfig merges spec.dnsConfig into cfg: servers and searches are appended
// without duplicates; options with the same name are replaced by the pod's value.
func appendPodDNSConfig(cfg *runtimeapi.DNSConfig, podCfg *v1.PodDNSConfig) {
	cfg.Servers = omitDuplicates(append(cfg.Servers, podCfg.Nameservers...))
	cfg.Searches = omitDuplicates(append(cfg.Searches, podCfg.Searches...))
	cfg.Options = mergeOptions(cfg.Options, podCfg.Options)
}

// mergeOptions merges resolver options by name ("name" or "name:value"), keeping the
// order in which names first appear; later values win.
func mergeOptions(existing []string, podOptions []v1.PodDNSConfigOption) []string {
	var names []string
	values := map[string]string{}
	set := func(name, value string) {
		if _, ok := values[name]; !ok {
			names = append(names, name)
		}
		values[name] = value
	}
	for _, op := range existing {
		name, value, _ := strings.Cut(op, ":")
		set(name, value)
	}
	for _, op := range podOptions {
		value := ""
		if op.Value != nil {
			value = *op.Value
		}
		set(op.Name, value)
	}
	out := make([]string, 0, len(names))
	for _, name := range names {
		if v := values[name]; v != "" {
			out = append(out, name+":"+v)
		} else {
			out = append(out, name)
		}
	}
	return out
}

// fitLimits trims the server and search lists to what resolvers accept, recording a
// DNSConfigForming warning when something is dropped.
func (c *Configurer) fitLimits(cfg *runtimeapi.DNSConfig, pod *v1.Pod) {
	if len(cfg.Servers) > MaxDNSNameservers {
		cfg.Servers = cfg.Servers[:MaxDNSNameservers]
		msg := "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: " +
			strings.Join(cfg.Servers, " ")
		c.logger.Warn(msg, zap.String("pod", podName(pod)))
		c.event(pod, ReasonDNSConfigForming, msg)
	}
	searches, exceeded := FitSearchLimits(cfg.Searches)
	cfg.Searches = searches
	if exceeded {
		msg := "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: " +
			strings.Join(searches, " ")
		c.logger.Warn(msg, zap.String("pod", podName(pod)))
		c.event(pod, ReasonDNSConfigForming, msg)
	}
}

// FitSearchLimits applies the search limits: at most MaxDNSSearchPaths domains, none
// longer than 253 characters, and a search line of at most MaxDNSSearchListChars
// (domains are dropped from the end). It reports whether anything was dropped.
func FitSearchLimits(searches []string) ([]string, bool) {
	exceeded := false
	if len(searches) > MaxDNSSearchPaths {
		searches = searches[:MaxDNSSearchPaths]
		exceeded = true
	}
	kept := make([]string, 0, len(searches))
	for _, s := range searches {
		if len(s) > maxDomainLength {
			exceeded = true
			continue
		}
		kept = append(kept, s)
	}
	lineLen := len(strings.Join(kept, " "))
	for lineLen > MaxDNSSearchListChars && len(kept) > 0 {
		last := kept[len(kept)-1]
		kept = kept[:len(kept)-1]
		lineLen -= len(last)
		if len(kept) > 0 {
			lineLen-- // the separating space
		}
		exceeded = true
	}
	return kept, exceeded
}

// CheckResolvConf reports (as an error suitable for a node warning) a host resolv.conf
// whose search line cannot fit next to the cluster domains. nil when fine or unset.
func (c *Configurer) CheckResolvConf() error {
	if c.resolvConf == "" {
		return nil
	}
	cfg, err := c.hostDNSConfig()
	if err != nil {
		return err
	}
	limit := MaxDNSSearchPaths
	if c.clusterDomain != "" {
		limit -= 3
	}
	switch {
	case len(cfg.Searches) > limit:
		return fmt.Errorf("resolv.conf file %q contains search line consisting of more than %d domains", c.resolvConf, limit)
	case len(strings.Join(cfg.Searches, " ")) > MaxDNSSearchListChars:
		return fmt.Errorf("resolv.conf file %q contains search line which length is more than allowed %d chars", c.resolvConf, MaxDNSSearchListChars)
	}
	for _, s := range cfg.Searches {
		if len(s) > maxDomainLength {
			return fmt.Errorf("resolv.conf file %q contains a search path which length is more than allowed %d chars", c.resolvConf, maxDomainLength)
		}
	}
	return nil
}

func (c *Configurer) event(pod *v1.Pod, reason, msg string) {
	if c.recorder != nil {
		c.recorder.Event(pod, v1.EventTypeWarning, reason, msg)
	}
}

func omitDuplicates(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func podName(pod *v1.Pod) string {
	return pod.Namespace + "/" + pod.Name
}

func readAtMost(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("file is larger than %d bytes", limit)
	}
	return data, nil
}
