package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
)

// Authorization modes (KubeletConfiguration authorization.mode).
const (
	ModeWebhook     = "Webhook"
	ModeAlwaysAllow = "AlwaysAllow"
)

// Options configures Auth. The zero TTLs mean no caching (as upstream); the
// KubeletConfiguration defaults are 2m (authentication), 5m (authorized) and
// 30s (unauthorized).
type Options struct {
	// Client makes the TokenReviews and SubjectAccessReviews (upstream: the
	// kubelet's own node credentials). It may be nil only when neither
	// webhook is on.
	Client   kubernetes.Interface
	NodeName string
	// ClientCAFile (--client-ca-file) verifies client certificates; ""
	// turns x509 authentication off. The file is reloaded when it changes
	// while Run runs.
	ClientCAFile        string
	AnonymousEnabled    bool // --anonymous-auth (kubeadm: false)
	WebhookAuthnEnabled bool // authentication.webhook.enabled
	// WebhookAuthnCacheTTL is authentication.webhook.cacheTTL.
	WebhookAuthnCacheTTL time.Duration
	// AuthorizationMode is ModeWebhook or ModeAlwaysAllow.
	AuthorizationMode           string
	WebhookAuthzAuthorizedTTL   time.Duration
	WebhookAuthzUnauthorizedTTL time.Duration
	Logger                      *zap.Logger
}

// Auth authenticates and authorizes requests to the kubelet API.
type Auth struct {
	authn    authenticator.Request
	authz    authorizer.UnconditionalAuthorizer
	clientCA *dynamiccertificates.DynamicFileCAContent // nil without ClientCAFile
	nodeName string
	logger   *zap.Logger
}

// webhookRetryBackoff is the retry of both webhooks (upstream
// DefaultAuthWebhookRetryBackoff).
func webhookRetryBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
}

// New builds the authenticator and the authorizer (upstream BuildAuth). It
// reads ClientCAFile once; Run keeps it fresh.
func New(opts Options) (*Auth, error) {
	if opts.NodeName == "" {
		return nil, errors.New("kubelet API auth: NodeName is required")
	}
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	a := &Auth{nodeName: opts.NodeName, logger: logger}
	var err error
	if a.authn, a.clientCA, err = buildAuthn(opts); err != nil {
		return nil, fmt.Errorf("kubelet API authentication: %w", err)
	}
	if a.authz, err = buildAuthz(opts); err != nil {
		return nil, fmt.Errorf("kubelet API authorization: %w", err)
	}
	logger.Info("kubelet API auth configured", zap.String("clientCAFile", opts.ClientCAFile),
		zap.Bool("anonymous", opts.AnonymousEnabled), zap.Bool("webhookAuthentication", opts.WebhookAuthnEnabled),
		zap.String("authorizationMode", opts.AuthorizationMode))
	return a, nil
}

// buildAuthn is upstream BuildAuthn: x509 (when a client CA file is given),
// then webhook tokens (when enabled), anonymous last (when enabled).
func buildAuthn(opts Options) (authenticator.Request, *dynamiccertificates.DynamicFileCAContent, error) {
	cfg := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous: &apiserver.AnonymousAuthConfig{Enabled: opts.AnonymousEnabled},
		CacheTTL:  opts.WebhookAuthnCacheTTL,
	}
	var clientCA *dynamiccertificates.DynamicFileCAContent
	if opts.ClientCAFile != "" {
		var err error
		if clientCA, err = dynamiccertificates.NewDynamicCAContentFromFile("client-ca-bundle", opts.ClientCAFile); err != nil {
			return nil, nil, fmt.Errorf("--client-ca-file %s: %w", opts.ClientCAFile, err)
		}
		cfg.ClientCertificateCAContentProvider = clientCA
	}
	if opts.WebhookAuthnEnabled {
		if opts.Client == nil {
			return nil, nil, errors.New("no API client: webhook authentication needs one")
		}
		cfg.TokenAccessReviewClient = opts.Client.AuthenticationV1()
		cfg.WebhookRetryBackoff = webhookRetryBackoff()
	}
	authn, _, err := cfg.New()
	if err != nil {
		return nil, nil, err
	}
	return authn, clientCA, nil
}

// buildAuthz is upstream BuildAuthz.
func buildAuthz(opts Options) (authorizer.UnconditionalAuthorizer, error) {
	switch opts.AuthorizationMode {
	case ModeAlwaysAllow:
		return authorizerfactory.NewAlwaysAllowAuthorizer(), nil
	case ModeWebhook:
		if opts.Client == nil {
			return nil, errors.New("no API client: webhook authorization needs one")
		}
		return authorizerfactory.DelegatingAuthorizerConfig{
			SubjectAccessReviewClient: opts.Client.AuthorizationV1(),
			AllowCacheTTL:             opts.WebhookAuthzAuthorizedTTL,
			DenyCacheTTL:              opts.WebhookAuthzUnauthorizedTTL,
			WebhookRetryBackoff:       webhookRetryBackoff(),
		}.New()
	case "":
		return nil, errors.New("no authorization mode given")
	}
	return nil, fmt.Errorf("unknown authorization mode %q (want %s or %s)", opts.AuthorizationMode, ModeWebhook, ModeAlwaysAllow)
}

// Run watches the client CA file and reloads it on change until ctx ends.
// Call it once, in its own goroutine.
func (a *Auth) Run(ctx context.Context) {
	if a.clientCA != nil {
		a.clientCA.Run(ctx, 1)
	}
	<-ctx.Done()
}

// Filter returns a handler that serves a request with next only when it is
// authenticated and authorized:
//   - no credentials, or credentials that fail: 401 "Unauthorized";
//   - AllRequestAttributes all denied: 403 "Forbidden (user=..., verb=...,
//     resource=nodes, subresource(s)=[...])";
//   - the authorizer failing (say, the API server is unreachable and nothing
//     is cached): 500 "Authorization error (...)".
//
// next gets the request with the user in its context (UserFrom) and its
// path in the cleaned form that was authorized (see RequestAttributes).
func (a *Auth) Filter(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, ok, err := a.authn.AuthenticateRequest(r)
		if err != nil || !ok {
			a.logger.Debug("kubelet API request unauthenticated", zap.String("path", r.URL.Path),
				zap.String("remote", r.RemoteAddr), zap.Error(err))
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := AllRequestAttributes(resp.User, r, a.nodeName)
		if status, msg := a.authorize(r.Context(), attrs); status != http.StatusOK {
			http.Error(w, msg, status)
			return
		}
		next.ServeHTTP(w, authorizedRequest(r, resp.User, attrs[0].GetPath()))
	})
}

// authorize asks the authorizer for each of attrs until one is allowed, and
// returns 200, or the status and message to refuse with.
func (a *Auth) authorize(ctx context.Context, attrs []authorizer.Attributes) (int, string) {
	first := attrs[0]
	fields := []zap.Field{zap.String("user", first.GetUser().GetName()), zap.String("verb", first.GetVerb()),
		zap.String("path", first.GetPath())}
	subresources := make([]string, 0, len(attrs))
	for _, attr := range attrs {
		subresources = append(subresources, attr.GetSubresource())
		decision, reason, err := a.authz.Authorize(ctx, attr)
		if err != nil {
			a.logger.Error("kubelet API authorization error", append(fields, zap.String("subresource", attr.GetSubresource()), zap.Error(err))...)
			return http.StatusInternalServerError, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=%s, subresource=%s)",
				attr.GetUser().GetName(), attr.GetVerb(), attr.GetResource(), attr.GetSubresource())
		}
		if decision == authorizer.DecisionAllow {
			return http.StatusOK, ""
		}
		if reason != "" {
			fields = append(fields, zap.String(attr.GetSubresource()+"Reason", reason))
		}
	}
	a.logger.Debug("kubelet API request forbidden", append(fields, zap.Strings("subresources", subresources))...)
	return http.StatusForbidden, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=%s, subresource(s)=%v)",
		first.GetUser().GetName(), first.GetVerb(), first.GetResource(), subresources)
}

// authorizedRequest is r with u in its context and cleanedPath as its path.
func authorizedRequest(r *http.Request, u user.Info, cleanedPath string) *http.Request {
	r = r.WithContext(genericapirequest.WithUser(r.Context(), u))
	if r.URL.Path != cleanedPath {
		// WithContext copied the request but shares the URL: copy it too.
		u := *r.URL
		u.Path, u.RawPath = cleanedPath, ""
		r.URL = &u
	}
	return r
}

// UserFrom returns the user Filter authenticated for the request of ctx.
func UserFrom(ctx context.Context) (user.Info, bool) {
	return genericapirequest.UserFrom(ctx)
}
