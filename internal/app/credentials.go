package app

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/credentialprovider"
	"github.com/kubelet-dockershim/kubelet/internal/features"
	"github.com/kubelet-dockershim/kubelet/internal/kuberuntime"
	"github.com/kubelet-dockershim/kubelet/internal/kuberuntime/pullmanager"
)

// nodeKeyring is the node's registry credentials, as upstream's kubelet
// reads them for every pull: the Docker config files (config.json in the
// root dir, the working directory, ~/.docker, /.docker; else .dockercfg) and,
// with --image-credential-provider-config, the exec credential provider
// plugins. It answers in CRI's form, for the runtime manager and the shim.
type nodeKeyring struct {
	k       credentialprovider.UnionKeyring
	plugins *credentialprovider.Plugins // nil without credential providers
}

// newNodeKeyring returns the node keyring, built once per process (the shim
// and the runtime manager share it); a bad credential provider config stops
// the kubelet, as upstream.
func newNodeKeyring(cfg *Config, logger *zap.Logger) (*nodeKeyring, error) {
	if cfg.keyring != nil {
		return cfg.keyring, nil
	}
	union := credentialprovider.UnionKeyring{credentialprovider.NewDockerConfigKeyring(cfg.RootDirectory, logger.Named("credentials"))}
	var plugins *credentialprovider.Plugins
	if cfg.ImageCredentialProviderConfig != "" || cfg.ImageCredentialProviderBinDir != "" {
		var err error
		plugins, err = credentialprovider.NewPlugins(cfg.ImageCredentialProviderConfig, cfg.ImageCredentialProviderBinDir,
			credentialprovider.WithLogger(logger.Named("credential-providers")),
			credentialprovider.WithServiceAccountTokens(cfg.enabled(features.KubeletServiceAccountTokenForCredentialProviders)))
		if err != nil {
			return nil, err
		}
		union = append(union, plugins)
	}
	cfg.keyring = &nodeKeyring{k: union, plugins: plugins}
	return cfg.keyring, nil
}

// useServiceAccounts gives the credential providers with tokenAttributes the
// API server's service accounts and tokens.
func (n *nodeKeyring) useServiceAccounts(conn *apiConn, tokens tokenSource) {
	if n.plugins != nil && conn != nil {
		n.plugins.UseServiceAccounts(serviceAccounts{conn: conn, tokens: tokens})
	}
}

// tokenIssuer hands out service account tokens, cached (the volume manager).
type tokenIssuer interface {
	ServiceAccountToken(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

// tokenSource is the token issuer once built; nil before.
type tokenSource func() tokenIssuer

// serviceAccounts reads service accounts (a GET each time, as upstream) and
// takes their tokens from the volume manager's cache (TokenRequests as the
// node, reused until 80% of their lifetime).
type serviceAccounts struct {
	conn   *apiConn
	tokens tokenSource
}

func (s serviceAccounts) ServiceAccount(ctx context.Context, namespace, name string) (*v1.ServiceAccount, error) {
	return s.conn.client.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (s serviceAccounts) Token(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	if t := s.tokens(); t != nil {
		return t.ServiceAccountToken(ctx, namespace, name, tr)
	}
	return s.conn.objects.CreateToken(ctx, namespace, name, tr)
}

// Lookup answers the credentials for an image repository pulled for no pod
// (the sandbox image), most specific first.
func (n *nodeKeyring) Lookup(repository string) ([]*runtimeapi.AuthConfig, bool) {
	creds, _ := n.k.LookupForPod(context.Background(), repository, credentialprovider.Pod{})
	out := make([]*runtimeapi.AuthConfig, 0, len(creds))
	for _, c := range creds {
		out = append(out, c.CRI())
	}
	return out, len(out) > 0
}

// LookupForPod answers the credentials for an image repository pulled for
// pod, most specific first; providers with tokenAttributes get the pod's
// service account token, and their answers name the service account (the
// pull records of KubeletEnsureSecretPulledImages keep it).
func (n *nodeKeyring) LookupForPod(ctx context.Context, repository string, pod *v1.Pod) ([]kuberuntime.NodeCredential, bool) {
	var who credentialprovider.Pod
	if pod != nil {
		who = credentialprovider.Pod{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ServiceAccountName: pod.Spec.ServiceAccountName}
	}
	creds, _ := n.k.LookupForPod(ctx, repository, who)
	out := make([]kuberuntime.NodeCredential, 0, len(creds))
	for _, c := range creds {
		nc := kuberuntime.NodeCredential{Auth: c.CRI()}
		if sa := c.ServiceAccount; sa != nil {
			nc.ServiceAccount = &pullmanager.ServiceAccount{UID: sa.UID, Namespace: sa.Namespace, Name: sa.Name}
		}
		out = append(out, nc)
	}
	return out, len(out) > 0
}
