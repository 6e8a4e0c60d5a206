package network

import (
	"context"
	"fmt"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/version"
	"go.uber.org/zap"
)

const (
	loopbackNetwork = "cni-loopback"
	loopbackType    = "loopback"
	loopbackIfName  = "lo"
	// preferredLoopbackVersion is used when the installed loopback plugin
	// supports it; otherwise the highest version it supports is.
	preferredLoopbackVersion = "1.0.0"
)

// pickVersion returns preferred when supported lists it, else the highest
// version of supported that this libcni understands.
func pickVersion(supported []string, preferred string) (string, error) {
	best := ""
	for _, v := range supported {
		if v == preferred {
			return v, nil
		}
		if newer, err := version.GreaterThan(v, version.Current()); err != nil || newer {
			continue // unparsable, or newer than libcni implements
		}
		if best == "" {
			best = v
			continue
		}
		if gt, err := version.GreaterThan(v, best); err == nil && gt {
			best = v
		}
	}
	if best == "" {
		return "", fmt.Errorf("no usable CNI version among %v", supported)
	}
	return best, nil
}

// loopbackConf returns the in-code loopback configuration, asking the
// installed plugin once which CNI version to use.
func (m *Manager) loopbackConf(ctx context.Context) (*libcni.PluginConfig, error) {
	m.loMu.Lock()
	defer m.loMu.Unlock()
	if m.loConf != nil {
		return m.loConf, nil
	}
	info, err := m.cni.GetVersionInfo(ctx, loopbackType)
	if err != nil {
		return nil, fmt.Errorf("querying the %s plugin version: %w", loopbackType, err)
	}
	v, err := pickVersion(info.SupportedVersions(), preferredLoopbackVersion)
	if err != nil {
		return nil, fmt.Errorf("%s plugin: %w", loopbackType, err)
	}
	data := fmt.Sprintf(`{"cniVersion":%q,"name":%q,"type":%q}`, v, loopbackNetwork, loopbackType)
	conf, err := libcni.NetworkPluginConfFromBytes([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("building the loopback config: %w", err)
	}
	m.loConf = conf
	return conf, nil
}

func loopbackRuntimeConf(pod Pod) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: pod.ID,
		NetNS:       pod.NetNS,
		IfName:      loopbackIfName,
		Args:        cniArgs(pod),
	}
}

// addLoopback brings lo up in the pod's netns.
func (m *Manager) addLoopback(ctx context.Context, pod Pod) error {
	conf, err := m.loopbackConf(ctx)
	if err != nil {
		return err
	}
	if _, err := m.cni.AddNetwork(ctx, conf, loopbackRuntimeConf(pod)); err != nil {
		return fmt.Errorf("plugin %s failed (add): %w", loopbackType, err)
	}
	return nil
}

// delLoopback runs the loopback DEL, best effort: lo disappears with the
// netns anyway, and with an empty netns the plugin does nothing but libcni
// still drops its cached result. Failures are only logged.
func (m *Manager) delLoopback(ctx context.Context, pod Pod, log *zap.Logger) {
	conf, err := m.loopbackConf(ctx)
	if err == nil {
		err = m.cni.DelNetwork(ctx, conf, loopbackRuntimeConf(pod))
	}
	if err != nil {
		log.Debug("loopback teardown failed (ignored)", zap.Error(err))
	}
}
