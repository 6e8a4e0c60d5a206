package app

import (
	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/credentialprovider"
)

// nodeKeyring is the node's registry credentials, as upstream's kubelet
// reads them for every pull: the Docker config files (config.json in the
// root dir, the working directory, ~/.docker, /.docker; else .dockercfg) and,
// with --image-credential-provider-config, the exec credential provider
// plugins. It answers in CRI's form, for the runtime manager and the shim.
type nodeKeyring struct{ k credentialprovider.Keyring }

// newNodeKeyring returns the node keyring, built once per process (the shim
// and the runtime manager share it); a bad credential provider config stops
// the kubelet, as upstream.
func newNodeKeyring(cfg *Config, logger *zap.Logger) (*nodeKeyring, error) {
	if cfg.keyring != nil {
		return cfg.keyring, nil
	}
	union := credentialprovider.UnionKeyring{credentialprovider.NewDockerConfigKeyring(cfg.RootDirectory, logger.Named("credentials"))}
	if cfg.ImageCredentialProviderConfig != "" || cfg.ImageCredentialProviderBinDir != "" {
		plugins, err := credentialprovider.NewPlugins(cfg.ImageCredentialProviderConfig, cfg.ImageCredentialProviderBinDir,
			credentialprovider.WithLogger(logger.Named("credential-providers")))
		if err != nil {
			return nil, err
		}
		union = append(union, plugins)
	}
	cfg.keyring = &nodeKeyring{k: union}
	return cfg.keyring, nil
}

// Lookup answers the credentials for an image repository, most specific
// first.
func (n *nodeKeyring) Lookup(repository string) ([]*runtimeapi.AuthConfig, bool) {
	creds, ok := n.k.Lookup(repository)
	out := make([]*runtimeapi.AuthConfig, 0, len(creds))
	for _, c := range creds {
		out = append(out, c.CRI())
	}
	return out, ok && len(out) > 0
}
