package options

import (
	"fmt"

	"github.com/kubelet-dockershim/kubelet/internal/app/kubeletconfig"
)

// Version is the Kubernetes version this kubelet reports (kubeadm parses
// "Kubernetes vX.Y.Z" from --version); set with -ldflags -X at build time.
var Version = "v1.37.1"

// Base is the defaults with the --config file and the --config-dir
// drop-ins (if any) applied: the layer that the flags then override.
func Base(args []string) (Config, error) {
	cfg := DefaultConfig()
	path, dir := configPathsFromArgs(args)
	if path != "" {
		kc, err := kubeletconfig.Load(path)
		if err != nil {
			return cfg, err
		}
		kubeletconfig.SetDefaults(kc)
		kubeletconfig.ApplyEvictionHardDefaults(kc)
		cfg.Kubelet = *kc
		cfg.ConfigFile = path
	}
	if dir != "" {
		skipped, err := mergeConfigDir(&cfg.Kubelet, dir)
		if err != nil {
			return cfg, fmt.Errorf("failed to merge kubelet configs: %w", err)
		}
		cfg.ConfigDir, cfg.skippedDropins = dir, skipped
	}
	if path != "" || dir != "" {
		cfg.fileFeatureGates = cfg.Kubelet.FeatureGates
	}
	return cfg, nil
}
