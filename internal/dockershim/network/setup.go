package network

import (
	"context"
	"fmt"

	"go.uber.org/zap"
)

// SetUpPod attaches the pod's netns to the network:
//
//  1. take the sandbox's lock;
//  2. load the default network (re-read when the conf dir changed);
//  3. bring up lo with the loopback plugin;
//  4. ADD the default network list on eth0, with the pod's CNI_ARGS and its
//     portMappings, bandwidth and dns capabilities;
//  5. read the pod's IPs from the result.
//
// When a step after 2 fails, everything attempted is deleted again on a
// fresh context (so IPs and port forwards never leak, even when ctx was
// cancelled) and the original error is returned.
func (m *Manager) SetUpPod(ctx context.Context, pod Pod) (_ *Result, retErr error) {
	if err := pod.validate(true); err != nil {
		return nil, fmt.Errorf("setting up the network of sandbox %q: %w", pod.ID, err)
	}
	log := m.podLogger(pod)
	unlock, err := m.locks.lock(ctx, pod.ID)
	if err != nil {
		return nil, err
	}
	defer unlock()

	net, err := m.defaultNetwork(ctx)
	if err != nil {
		return nil, fmt.Errorf("setting up the network of sandbox %s: %w", pod.ID, err)
	}
	log = log.With(zap.String("network", net.list.Name))
	rt := runtimeConf(pod)
	netAttempted := false
	defer func() {
		if retErr != nil {
			m.rollback(ctx, pod, net, netAttempted, log)
		}
	}()

	if err := m.addLoopback(ctx, pod); err != nil {
		return nil, fmt.Errorf("setting up loopback of sandbox %s: %w", pod.ID, err)
	}
	netAttempted = true
	res, err := m.cni.AddNetworkList(ctx, net.list, rt)
	if err != nil {
		return nil, fmt.Errorf("adding sandbox %s to network %q: %w", pod.ID, net.list.Name, err)
	}
	out, err := newResult(res, defaultIfName)
	if err != nil {
		return nil, fmt.Errorf("adding sandbox %s to network %q: %w", pod.ID, net.list.Name, err)
	}
	if len(out.IPs) == 0 {
		log.Warn("network assigned no IP to the pod", zap.String("interface", out.Interface))
	}
	log.Info("pod network set up", zap.Strings("ips", out.IPs), zap.String("interface", out.Interface))
	return out, nil
}

// rollback undoes a partial SetUpPod: DEL of the default network (when its
// ADD ran) then of loopback, on a context that outlives the request's.
func (m *Manager) rollback(ctx context.Context, pod Pod, net *network, netAttempted bool, log *zap.Logger) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if netAttempted {
		if err := m.cni.DelNetworkList(cctx, net.list, runtimeConf(pod)); err != nil {
			log.Error("cleaning up after a failed network set-up", zap.Error(err))
		} else {
			log.Info("cleaned up after a failed network set-up")
		}
	}
	m.delLoopback(cctx, pod, log)
}
