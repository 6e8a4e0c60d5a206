package network

import (
	"context"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/libcni"
	"go.uber.org/zap"
)

// delTarget is one DEL of a network list for a sandbox.
type delTarget struct {
	list   *libcni.NetworkConfigList
	rt     *libcni.RuntimeConf
	source string // "cache" or "config", for logs
}

// TearDownPod detaches the pod from its network:
//
//  1. take the sandbox's lock;
//  2. find what to delete: each eth0 attachment libcni cached at ADD time,
//     with the configuration and arguments it was added with, so a changed
//     or removed conf dir still tears down correctly; without a cache entry,
//     the current default network;
//  3. DEL each of them, then (best effort) loopback.
//
// pod.NetNS may be empty when the sandbox is gone; plugins then release
// IPAM and port forwards from the cached result. Tearing down a pod that was
// never set up succeeds, and so does one with neither cache nor config.
func (m *Manager) TearDownPod(ctx context.Context, pod Pod) error {
	if err := pod.validate(false); err != nil {
		return fmt.Errorf("tearing down the network of sandbox %q: %w", pod.ID, err)
	}
	log := m.podLogger(pod)
	unlock, err := m.locks.lock(ctx, pod.ID)
	if err != nil {
		return err
	}
	defer unlock()

	targets, foreignLoopback := m.teardownTargets(ctx, pod, log)
	for _, t := range foreignLoopback {
		// Best effort, as this shim's own loopback DEL: it only drops the
		// cache entry.
		if err := m.cni.DelNetworkList(ctx, t.list, t.rt); err != nil {
			log.Debug("cached loopback teardown failed (ignored)", zap.Error(err))
		}
	}
	if len(targets) == 0 {
		log.Debug("no network config and no cached attachment: nothing to tear down")
		m.delLoopback(ctx, pod, log)
		return nil
	}
	var errs []error
	for _, t := range targets {
		if err := m.cni.DelNetworkList(ctx, t.list, t.rt); err != nil {
			errs = append(errs, fmt.Errorf("removing sandbox %s from network %q (%s): %w", pod.ID, t.list.Name, t.source, err))
			continue
		}
		log.Info("pod network torn down", zap.String("network", t.list.Name), zap.String("from", t.source), zap.String("netns", t.rt.NetNS))
	}
	m.delLoopback(ctx, pod, log)
	return errors.Join(errs...)
}

// teardownTargets lists the DELs for pod, preferring libcni's cache over the
// current configuration. foreignLoopback are the loopback attachments
// cri-dockerd and the 1.23 dockershim cached under eth0 (this shim's own is
// under lo): DEL drops their cache entries.
func (m *Manager) teardownTargets(ctx context.Context, pod Pod, log *zap.Logger) (targets, foreignLoopback []delTarget) {
	current, curErr := m.defaultNetwork(ctx)
	if curErr != nil {
		log.Debug("no current default network", zap.Error(curErr))
	}
	attachments, unusable, err := m.cachedAttachments(pod.ID, current)
	if err != nil {
		log.Warn("reading libcni's cached attachments", zap.Error(err))
	}
	for _, e := range unusable {
		log.Warn("cached attachment not torn down", zap.Error(e))
	}
	for _, ca := range attachments {
		t := delTarget{list: ca.list, rt: cachedRuntimeConf(pod, ca.attachment), source: "cache"}
		if ca.attachment.Network == loopbackNetwork {
			foreignLoopback = append(foreignLoopback, t)
			continue
		}
		targets = append(targets, t)
	}
	if len(targets) == 0 && current != nil {
		targets = append(targets, delTarget{list: current.list, rt: runtimeConf(pod), source: "config"})
	}
	return targets, foreignLoopback
}

// cachedList parses the network list cached with an attachment, falling
// back to the current default network when it has the same name.
func cachedList(a *libcni.NetworkAttachment, current *network) (*libcni.NetworkConfigList, error) {
	list, err := libcni.NetworkConfFromBytes(a.Config)
	if err == nil && len(list.Plugins) == 0 {
		err = errors.New("cached config lists no plugins")
	}
	if err == nil {
		return list, nil
	}
	if current != nil && current.list.Name == a.Network {
		return current.list, nil
	}
	return nil, err
}

// cachedRuntimeConf rebuilds the ADD's invocation for the DEL: the cached
// CNI_ARGS and capabilities, but the netns the caller gives now (the cached
// path may name a process that no longer exists, or another one).
func cachedRuntimeConf(pod Pod, a *libcni.NetworkAttachment) *libcni.RuntimeConf {
	rt := runtimeConf(pod)
	rt.IfName = a.IfName
	if a.CniArgs != nil {
		rt.Args = a.CniArgs
	}
	if a.CapabilityArgs != nil {
		rt.CapabilityArgs = a.CapabilityArgs
	}
	return rt
}
