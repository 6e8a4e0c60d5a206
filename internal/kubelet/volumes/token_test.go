package volumes

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	authenticationv1 "k8s.io/api/authentication/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func boundRequest(podUID k8stypes.UID, expSeconds int64, auds ...string) *authenticationv1.TokenRequest {
	return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         auds,
		ExpirationSeconds: &expSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web", UID: podUID},
	}}
}

func TestTokenCacheRefresh(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc        string
		expSeconds  int64
		steps       []time.Duration // clock advances before each get
		wantTokens  []string        // token returned by each get
		wantCreated int
	}{
		{desc: "fresh token is reused until 80% of its lifetime", expSeconds: 3600,
			steps:      []time.Duration{0, time.Minute, 46 * time.Minute, 61 * time.Second},
			wantTokens: []string{"token-1", "token-1", "token-1", "token-2"}, wantCreated: 2},
		{desc: "refreshed again 80% after the new issue time", expSeconds: 1000,
			steps:      []time.Duration{0, 800 * time.Second, 799 * time.Second, time.Second},
			wantTokens: []string{"token-1", "token-2", "token-2", "token-3"}, wantCreated: 3},
		{desc: "long-lived tokens are refreshed after 24h", expSeconds: 7 * 24 * 3600,
			steps:      []time.Duration{0, 23 * time.Hour, time.Hour},
			wantTokens: []string{"token-1", "token-1", "token-2"}, wantCreated: 2},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			objs := newFakeObjects(clk)
			c := newTokenCache(objs, clk, zaptest.NewLogger(t))
			for i, step := range tc.steps {
				clk.Step(step)
				tr, err := c.get(context.Background(), "shop", "default", boundRequest("uid", tc.expSeconds))
				if err != nil {
					t.Fatalf("get %d: %v", i, err)
				}
				if tr.Status.Token != tc.wantTokens[i] {
					t.Errorf("get %d: token %q, want %q", i, tr.Status.Token, tc.wantTokens[i])
				}
			}
			if n := len(objs.tokenRequests()); n != tc.wantCreated {
				t.Errorf("%d TokenRequests, want %d", n, tc.wantCreated)
			}
		})
	}
}

func TestTokenCacheKeysAndForget(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	objs := newFakeObjects(clk)
	c := newTokenCache(objs, clk, zaptest.NewLogger(t))
	ctx := context.Background()
	get := func(ns, sa string, req *authenticationv1.TokenRequest) string {
		t.Helper()
		tr, err := c.get(ctx, ns, sa, req)
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	a := get("shop", "default", boundRequest("uid-a", 3600))
	for _, other := range []struct {
		desc   string
		ns, sa string
		req    *authenticationv1.TokenRequest
	}{
		{desc: "other pod", ns: "shop", sa: "default", req: boundRequest("uid-b", 3600)},
		{desc: "other audience", ns: "shop", sa: "default", req: boundRequest("uid-a", 3600, "vault")},
		{desc: "other lifetime", ns: "shop", sa: "default", req: boundRequest("uid-a", 7200)},
		{desc: "other service account", ns: "shop", sa: "builder", req: boundRequest("uid-a", 3600)},
		{desc: "other namespace", ns: "dev", sa: "default", req: boundRequest("uid-a", 3600)},
	} {
		if got := get(other.ns, other.sa, other.req); got == a {
			t.Errorf("%s: shares the token %q", other.desc, got)
		}
	}
	if got := get("shop", "default", boundRequest("uid-a", 3600)); got != a {
		t.Errorf("same request: %q, want the cached %q", got, a)
	}
	c.forgetPod("uid-a")
	if got := get("shop", "default", boundRequest("uid-a", 3600)); got == a {
		t.Errorf("after forgetPod: still the old token %q", got)
	}
	// Expired entries go away on the next lookup.
	clk.Step(3 * time.Hour)
	_ = get("shop", "default", boundRequest("uid-c", 3600))
	c.mu.Lock()
	n := len(c.tokens)
	c.mu.Unlock()
	if n != 1 {
		t.Errorf("%d cached tokens after expiry, want 1", n)
	}
}

func TestTokenCacheAPIFailure(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	objs := newFakeObjects(clk)
	c := newTokenCache(objs, clk, zaptest.NewLogger(t))
	ctx := context.Background()
	req := boundRequest("uid", 3600)
	if _, err := c.get(ctx, "shop", "default", req); err != nil {
		t.Fatal(err)
	}
	down := errors.New("apiserver down")
	objs.setErr(down)
	clk.Step(50 * time.Minute) // due for refresh, still valid
	tr, err := c.get(ctx, "shop", "default", req)
	if err != nil || tr.Status.Token != "token-1" {
		t.Fatalf("refresh failure with a valid cached token: %v, %v", tr, err)
	}
	clk.Step(10 * time.Minute) // expired now
	if _, err := c.get(ctx, "shop", "default", req); !errors.Is(err, down) {
		t.Fatalf("expired token and API down: err = %v", err)
	}
	if _, err := c.get(ctx, "shop", "default", boundRequest("uid-new", 3600)); !errors.Is(err, down) {
		t.Fatalf("no cached token and API down: err = %v", err)
	}
}

func TestCheckTokenResponse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		tr   *authenticationv1.TokenRequest
	}{
		{desc: "nil"},
		{desc: "empty token", tr: &authenticationv1.TokenRequest{}},
		{desc: "no expiration", tr: &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{Token: "t"}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if err := checkTokenResponse(tc.tr); err == nil {
				t.Error("accepted")
			}
		})
	}
}
