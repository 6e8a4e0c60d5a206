package volumes

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	authenticationv1 "k8s.io/api/authentication/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Token refresh policy (upstream's token manager): a cached token is replaced once
// it is older than 80% of its lifetime, or older than 24 hours whatever its lifetime.
const (
	tokenMaxAge         = 24 * time.Hour
	tokenRefreshPercent = 80
)

// tokenCache hands out service account tokens from TokenRequests, cached per
// (namespace, service account, audiences, lifetime, bound pod). Expired entries are
// dropped on every lookup and a pod's entries when its volumes are torn down, so
// it needs no goroutine. Safe for concurrent use.
type tokenCache struct {
	objects APIObjects
	clock   clock.PassiveClock
	logger  *zap.Logger

	mu     sync.Mutex
	tokens map[tokenKey]*authenticationv1.TokenRequest
}

type tokenKey struct {
	namespace, serviceAccount string
	audiences                 string // joined with NUL
	expirationSeconds         int64
	podName                   string
	podUID                    k8stypes.UID
}

func newTokenCache(objects APIObjects, clk clock.PassiveClock, logger *zap.Logger) *tokenCache {
	return &tokenCache{objects: objects, clock: clk, logger: logger, tokens: map[tokenKey]*authenticationv1.TokenRequest{}}
}

func keyOf(namespace, sa string, req *authenticationv1.TokenRequest) tokenKey {
	k := tokenKey{namespace: namespace, serviceAccount: sa, audiences: strings.Join(req.Spec.Audiences, "\x00")}
	if req.Spec.ExpirationSeconds != nil {
		k.expirationSeconds = *req.Spec.ExpirationSeconds
	}
	if ref := req.Spec.BoundObjectRef; ref != nil {
		k.podName, k.podUID = ref.Name, ref.UID
	}
	return k
}

// get returns a token for req (which must set ExpirationSeconds): the cached one
// while it is fresh, else a new one from the API server. When the API call fails
// and the cached token has not expired yet, the cached token is returned.
func (c *tokenCache) get(ctx context.Context, namespace, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	key := keyOf(namespace, sa, req)
	now := c.clock.Now()
	c.mu.Lock()
	c.dropExpiredLocked(now)
	cached := c.tokens[key]
	c.mu.Unlock()
	if cached != nil && !needsRefresh(cached, now) {
		return cached, nil
	}

	tr, err := c.objects.CreateToken(ctx, namespace, sa, req.DeepCopy())
	if err == nil {
		err = checkTokenResponse(tr)
	}
	if err != nil {
		if cached != nil && c.clock.Now().Before(cached.Status.ExpirationTimestamp.Time) {
			c.logger.Warn("Could not refresh the service account token; using the cached one, still valid", zap.String("namespace", namespace),
				zap.String("serviceAccount", sa), zap.String("pod", key.podName), zap.Error(err))
			return cached, nil
		}
		return nil, err
	}
	tr = tr.DeepCopy()
	if tr.Spec.ExpirationSeconds == nil {
		tr.Spec.ExpirationSeconds = req.Spec.ExpirationSeconds
	}
	c.mu.Lock()
	c.tokens[key] = tr
	c.mu.Unlock()
	c.logger.Debug("Issued service account token", zap.String("namespace", namespace),
		zap.String("serviceAccount", sa), zap.String("pod", key.podName),
		zap.Time("expires", tr.Status.ExpirationTimestamp.Time))
	return tr, nil
}

// checkTokenResponse rejects responses a token file cannot be made of.
func checkTokenResponse(tr *authenticationv1.TokenRequest) error {
	switch {
	case tr == nil:
		return errors.New("token request returned no object")
	case tr.Status.Token == "":
		return errors.New("token request returned an empty token")
	case tr.Status.ExpirationTimestamp.IsZero():
		return errors.New("token request returned no expiration time")
	}
	return nil
}

// needsRefresh reports whether tr is older than 80% of its lifetime or than 24h.
// The issue time is the expiration minus the lifetime (spec.expirationSeconds).
func needsRefresh(tr *authenticationv1.TokenRequest, now time.Time) bool {
	exp := tr.Status.ExpirationTimestamp.Time
	if tr.Spec.ExpirationSeconds == nil {
		return !now.Before(exp)
	}
	ttl := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	issued := exp.Add(-ttl)
	if !now.Before(issued.Add(tokenMaxAge)) {
		return true
	}
	return !now.Before(issued.Add(ttl * tokenRefreshPercent / 100))
}

// dropExpiredLocked removes expired tokens.
func (c *tokenCache) dropExpiredLocked(now time.Time) {
	for k, tr := range c.tokens {
		if !now.Before(tr.Status.ExpirationTimestamp.Time) {
			delete(c.tokens, k)
		}
	}
}

// forgetPod drops every token bound to the pod.
func (c *tokenCache) forgetPod(uid k8stypes.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.tokens {
		if k.podUID == uid {
			delete(c.tokens, k)
		}
	}
}

// ServiceAccountToken is a token for service account namespace/name from the
// cache the projected volumes use: reused until 80% of its lifetime (the
// credential providers with tokenAttributes take theirs here, as upstream's
// take them from the token manager).
func (m *Manager) ServiceAccountToken(ctx context.Context, namespace, name string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	if m.tokens.objects == nil {
		return nil, errors.New("service account tokens need an API server")
	}
	return m.tokens.get(ctx, namespace, name, req)
}
