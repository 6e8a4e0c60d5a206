package app

import (
	"go.uber.org/zap"
	"k8s.io/component-base/featuregate"

	"github.com/kubelet-dockershim/kubelet/internal/app/options"
	"github.com/kubelet-dockershim/kubelet/internal/features"
)

// Config is the configuration of this process (options.Config: flags,
// KubeletConfiguration, --config-dir) with what the process adds to it at
// start: the feature gates in force, the logger's level (/debug/flags/v
// changes it) and the node's registry credentials.
type Config struct {
	options.Config
	// features is FeatureGate's result, set when the node starts.
	features featuregate.FeatureGate
	// logLevel is the process logger's level.
	logLevel *zap.AtomicLevel
	// keyring is the node's registry credentials (newNodeKeyring).
	keyring *nodeKeyring
}

// enabled reports whether gate f is on: the gate set of the start, or, before
// the node started (tests), the set the configuration gives now (not kept: the
// configuration may still change).
func (c *Config) enabled(f featuregate.Feature) bool {
	if c.features != nil {
		return c.features.Enabled(f)
	}
	fg, err := c.FeatureGate()
	return err == nil && fg.Enabled(f)
}

// gateEnabled reports whether the feature gate named name is on; false for
// a name the kubelet does not know.
func (c *Config) gateEnabled(name string) bool {
	return features.Known(name) && c.enabled(featuregate.Feature(name))
}
