package network

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/containernetworking/cni/libcni"
)

// CachedIPs returns the pod IPs of a sandbox from the result libcni cached
// for its eth0 when the sandbox was added to a network, whoever ran the ADD:
// this shim, cri-dockerd and the 1.23 dockershim all cache it under
// <cache dir>/results/<network>-<sandbox id>-eth0. It is how a sandbox
// another runtime created gets its IP back without entering its namespace.
// No cached attachment is an error; so is one whose result names no IP.
func (m *Manager) CachedIPs(ctx context.Context, sandboxID string) ([]string, error) {
	// The ID becomes part of a cache file's path.
	if sandboxID == "" || strings.Trim(sandboxID, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("%w: sandbox ID %q is not a Docker container ID", ErrInvalidPod, sandboxID)
	}
	current, _ := m.defaultNetwork(ctx)
	attachments, errs, err := m.cachedAttachments(sandboxID, current)
	if err != nil {
		return nil, err
	}
	for _, ca := range attachments {
		a := ca.attachment
		if a.Network == loopbackNetwork {
			continue
		}
		res, err := m.cni.GetNetworkListCachedResult(ca.list, &libcni.RuntimeConf{ContainerID: sandboxID, IfName: a.IfName})
		if err == nil && res == nil {
			err = errors.New("none")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("network %q: cached result: %w", a.Network, err))
			continue
		}
		r, err := newResult(res, a.IfName)
		if err != nil {
			errs = append(errs, fmt.Errorf("network %q: %w", a.Network, err))
			continue
		}
		if len(r.IPs) > 0 {
			return r.IPs, nil
		}
		errs = append(errs, fmt.Errorf("network %q: the cached result names no IP of %s", a.Network, a.IfName))
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("libcni cached no %s attachment of sandbox %s", defaultIfName, sandboxID)
	}
	return nil, errors.Join(errs...)
}

// cachedAttachment is an eth0 attachment libcni cached for a sandbox, with
// the network list to DEL it or read its result with.
type cachedAttachment struct {
	attachment *libcni.NetworkAttachment
	list       *libcni.NetworkConfigList
}

// cachedAttachments lists a sandbox's cached eth0 attachments (every
// sandbox's for ""; loopback included: cri-dockerd and the 1.23 dockershim
// cached it under eth0), each with its cached network list, else current's when it has the same name.
// Unusable ones come back as errs; err is a failure to read the cache.
func (m *Manager) cachedAttachments(sandboxID string, current *network) (out []cachedAttachment, errs []error, err error) {
	attachments, err := m.cni.GetCachedAttachments(sandboxID)
	if err != nil {
		return nil, nil, fmt.Errorf("reading libcni's cached attachments of sandbox %s: %w", sandboxID, err)
	}
	for _, a := range attachments {
		if a.IfName != defaultIfName {
			continue
		}
		list, err := cachedList(a, current)
		if err != nil {
			errs = append(errs, fmt.Errorf("unusable cached config of network %q: %w", a.Network, err))
			continue
		}
		out = append(out, cachedAttachment{attachment: a, list: list})
	}
	return out, errs, nil
}

// CachedSubnets returns the subnets (Result.Subnets) of every eth0
// attachment libcni cached, whoever ran its ADD: the pod networks this host
// had in use before this process started. Attachments whose result cannot be
// read are left out; err is a failure to read the cache itself.
func (m *Manager) CachedSubnets(ctx context.Context) ([]netip.Prefix, error) {
	current, _ := m.defaultNetwork(ctx)
	attachments, _, err := m.cachedAttachments("", current)
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, ca := range attachments {
		a := ca.attachment
		if a.Network == loopbackNetwork {
			continue
		}
		res, err := m.cni.GetNetworkListCachedResult(ca.list, &libcni.RuntimeConf{ContainerID: a.ContainerID, IfName: a.IfName})
		if err != nil || res == nil {
			continue
		}
		r, err := newResult(res, a.IfName)
		if err != nil {
			continue
		}
		for _, p := range r.Subnets {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out, nil
}
