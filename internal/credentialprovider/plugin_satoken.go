package credentialprovider

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"go.uber.org/zap"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	configv1 "k8s.io/kubelet/config/v1"
)

// Pod is the pod an image is pulled for: what a provider with tokenAttributes
// needs of it. The zero Pod is a pull for no pod (a static pod has no
// service account either).
type Pod struct {
	Namespace, Name    string
	UID                types.UID
	ServiceAccountName string
}

// PodKeyring is a Keyring whose answer may depend on the pod pulling.
type PodKeyring interface {
	LookupForPod(ctx context.Context, image string, pod Pod) ([]AuthConfig, bool)
}

// ServiceAccounts reads what providers with tokenAttributes send: a service
// account (its UID and annotations) and a token of it (TokenRequest, as the
// node: the Node authorizer and NodeRestriction apply).
type ServiceAccounts interface {
	ServiceAccount(ctx context.Context, namespace, name string) (*v1.ServiceAccount, error)
	Token(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

// tokenAttributes is a provider's tokenAttributes.
type tokenAttributes struct {
	audience              string
	requireServiceAccount bool
	required, optional    []string // annotation keys
	cacheType             configv1.ServiceAccountTokenCacheType
}

func newTokenAttributes(ta *configv1.ServiceAccountTokenAttributes) *tokenAttributes {
	if ta == nil || ta.ServiceAccountTokenAudience == "" {
		return nil
	}
	return &tokenAttributes{audience: ta.ServiceAccountTokenAudience, requireServiceAccount: ta.RequireServiceAccount != nil && *ta.RequireServiceAccount,
		required: ta.RequiredServiceAccountAnnotationKeys, optional: ta.OptionalServiceAccountAnnotationKeys, cacheType: ta.CacheType}
}

// saRequest is what a provider with tokenAttributes sends for one pull, and
// the key its answers are kept under. The zero saRequest sends nothing.
type saRequest struct {
	token       string
	annotations map[string]string
	// cacheKey: the service account (namespace, name, UID, annotations) and,
	// for cacheType Token, the token's hash; "" without a service account.
	cacheKey  string
	tokenHash string
	// account is the service account the token is of; nil without one.
	account *ServiceAccountCoordinates
}

// errRequiredAnnotation is a required annotation the service account lacks:
// the plugin is not run (a workload's way of opting in), as upstream.
type errRequiredAnnotation string

func (e errRequiredAnnotation) Error() string {
	return fmt.Sprintf("required annotation %s not found", string(e))
}

// serviceAccountToken reads the pod's service account and a token of it
// bound to the pod, for the provider's audience. run false: the plugin is
// not run (no service account while one is required, or a required
// annotation missing). Without a service account (a static pod, a pull for
// no pod) a provider that does not require one runs without a token.
func (p *pluginProvider) serviceAccountToken(ctx context.Context, image string, pod Pod) (saRequest, bool, error) {
	if pod.ServiceAccountName == "" {
		if p.tokens.requireServiceAccount {
			p.logger.Debug("Service account name is empty", zap.String("image", image), zap.String("pod", pod.Namespace+"/"+pod.Name))
			return saRequest{}, false, nil
		}
		return saRequest{}, true, nil
	}
	var accounts ServiceAccounts
	if a := p.accounts.Load(); a != nil {
		accounts = *a
	}
	if accounts == nil {
		return saRequest{}, false, errors.New("failed to get service account: cannot get ServiceAccounts when kubelet is in standalone mode")
	}
	sa, err := accounts.ServiceAccount(ctx, pod.Namespace, pod.ServiceAccountName)
	if err != nil {
		return saRequest{}, false, fmt.Errorf("failed to get service account: %w", err)
	}
	annotations, err := p.tokens.annotationsOf(sa)
	var missing errRequiredAnnotation
	if errors.As(err, &missing) {
		p.logger.Debug("Failed to get service account data", zap.String("image", image),
			zap.String("serviceAccount", pod.Namespace+"/"+pod.ServiceAccountName), zap.Error(err))
		return saRequest{}, false, nil
	}
	tr, err := accounts.Token(ctx, pod.Namespace, pod.ServiceAccountName, &authenticationv1.TokenRequest{
		ObjectMeta: metav1.ObjectMeta{UID: sa.UID},
		Spec: authenticationv1.TokenRequestSpec{
			Audiences: []string{p.tokens.audience},
			// expirationSeconds is the API's default, as upstream.
			BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
		},
	})
	if err != nil {
		return saRequest{}, false, fmt.Errorf("failed to get service account token: %w", err)
	}
	r := saRequest{token: tr.Status.Token, annotations: annotations,
		account: &ServiceAccountCoordinates{UID: string(sa.UID), Namespace: pod.Namespace, Name: pod.ServiceAccountName}}
	r.tokenHash = fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(r.token)))
	parts := []string{pod.Namespace, pod.ServiceAccountName, string(sa.UID), annotationsKey(annotations)}
	if p.tokens.cacheType == configv1.TokenServiceAccountTokenCacheType {
		parts = append(parts, "token", r.tokenHash)
	}
	r.cacheKey = joinKey(parts...)
	return r, true, nil
}

// annotationsOf picks the service account's required (all must be there) and
// optional annotations.
func (t *tokenAttributes) annotationsOf(sa *v1.ServiceAccount) (map[string]string, error) {
	out := make(map[string]string, len(t.required)+len(t.optional))
	for _, k := range t.required {
		v, ok := sa.Annotations[k]
		if !ok {
			return nil, errRequiredAnnotation(k)
		}
		out[k] = v
	}
	for _, k := range t.optional {
		if v, ok := sa.Annotations[k]; ok {
			out[k] = v
		}
	}
	return out, nil
}

// flightKey groups concurrent runs of the plugin: per image, token and
// annotations.
func (r saRequest) flightKey(image string) string {
	if r.token == "" {
		return image
	}
	return joinKey(image, r.tokenHash, annotationsKey(r.annotations))
}

// cacheKey is a cache entry's key: the answer's key (image, registry or
// global) with the service account's, when there is one.
func cacheKey(base, saKey string) string {
	if saKey == "" {
		return base
	}
	return joinKey(base, saKey)
}

// joinKey joins parts unambiguously (each prefixed by its length).
func joinKey(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(strconv.Itoa(len(p)))
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

// annotationsKey is the annotations sorted by key, joined unambiguously.
func annotationsKey(annotations map[string]string) string {
	keys := make([]string, 0, len(annotations))
	for k := range annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		parts = append(parts, k, annotations[k])
	}
	return joinKey(parts...)
}
