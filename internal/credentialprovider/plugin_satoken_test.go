package credentialprovider

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fakeAccounts answers service accounts and mints a new token per request
// (the API server's part; the plugin side is the real exec protocol).
type fakeAccounts struct {
	mu       sync.Mutex
	accounts map[string]*v1.ServiceAccount // namespace/name
	requests []*authenticationv1.TokenRequest
	err      error
}

func (f *fakeAccounts) ServiceAccount(_ context.Context, namespace, name string) (*v1.ServiceAccount, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sa := f.accounts[namespace+"/"+name]; sa != nil {
		return sa, nil
	}
	return nil, errors.New(`serviceaccounts "` + name + `" not found`)
}

func (f *fakeAccounts) Token(_ context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	f.requests = append(f.requests, tr)
	out := tr.DeepCopy()
	out.Status.Token = "token-" + namespace + "-" + name + "-" + string(rune('0'+len(f.requests)))
	return out, nil
}

const saProviderAttrs = "  tokenAttributes: {serviceAccountTokenAudience: registry-aud, requireServiceAccount: true, cacheType: %s," +
	" requiredServiceAccountAnnotationKeys: [example.com/role], optionalServiceAccountAnnotationKeys: [example.com/opt]}\n"

func saEnv(t *testing.T, cacheType string) (*pluginEnv, *fakeAccounts) {
	t.Helper()
	env := newPluginEnv(t, testProvider{matchImages: []string{"*.example.com"}, defaultCache: "10m",
		extra:    fmt.Sprintf(saProviderAttrs, cacheType),
		response: response("Registry", "", map[string]string{"registry.example.com": "robot"})})
	accounts := &fakeAccounts{accounts: map[string]*v1.ServiceAccount{
		"team/builder": {ObjectMeta: metav1.ObjectMeta{Name: "builder", Namespace: "team", UID: "sa-uid",
			Annotations: map[string]string{"example.com/role": "pull", "example.com/opt": "x", "other": "no"}}},
		"team/plain": {ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "team", UID: "plain-uid"}},
	}}
	env.plugins.UseServiceAccounts(accounts)
	return env, accounts
}

// TestPluginServiceAccountToken: a provider with tokenAttributes gets a token
// of the pod's service account for its audience, bound to the pod, with the
// annotations it names, and keeps its answer per service account (cacheType
// ServiceAccount): another pod of the same account gets it from the cache,
// a pod of an account without the required annotation does not run it, nor
// does a pull for no pod.
func TestPluginServiceAccountToken(t *testing.T) {
	t.Parallel()
	env, accounts := saEnv(t, "ServiceAccount")
	ctx := context.Background()
	pod := Pod{Namespace: "team", Name: "web-1", UID: "pod-uid-1", ServiceAccountName: "builder"}
	// The answer names the service account (the pull records keep it).
	robot := user("robot")
	robot.ServiceAccount = &ServiceAccountCoordinates{UID: "sa-uid", Namespace: "team", Name: "builder"}
	if got, _ := env.plugins.LookupForPod(ctx, "registry.example.com/app", pod); !reflect.DeepEqual(got, []AuthConfig{robot}) {
		t.Fatalf("credentials %v", got)
	}
	req := env.request(t, "test-plugin")
	if req["serviceAccountToken"] != "token-team-builder-1" {
		t.Errorf("request token %v", req["serviceAccountToken"])
	}
	if got := req["serviceAccountAnnotations"]; !reflect.DeepEqual(got, map[string]any{"example.com/role": "pull", "example.com/opt": "x"}) {
		t.Errorf("request annotations %v", got)
	}
	tr := accounts.requests[0]
	if tr.UID != "sa-uid" || !reflect.DeepEqual(tr.Spec.Audiences, []string{"registry-aud"}) || tr.Spec.ExpirationSeconds != nil ||
		!reflect.DeepEqual(*tr.Spec.BoundObjectRef, authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web-1", UID: "pod-uid-1"}) {
		t.Errorf("token request %+v", tr)
	}

	// Same account, another pod: a token is still asked (bound to that pod),
	// the answer comes from the cache.
	pod2 := Pod{Namespace: "team", Name: "web-2", UID: "pod-uid-2", ServiceAccountName: "builder"}
	if got, _ := env.plugins.LookupForPod(ctx, "registry.example.com/other", pod2); !reflect.DeepEqual(got, []AuthConfig{robot}) {
		t.Errorf("cached credentials %v", got)
	}
	if n := len(env.runs(t, "test-plugin")); n != 1 {
		t.Errorf("plugin ran %d times, want 1 (cached per service account)", n)
	}
	if len(accounts.requests) != 2 || accounts.requests[1].Spec.BoundObjectRef.Name != "web-2" {
		t.Errorf("token requests %d", len(accounts.requests))
	}

	// An account without the required annotation: the plugin is not run.
	plain := Pod{Namespace: "team", Name: "web-3", UID: "pod-uid-3", ServiceAccountName: "plain"}
	if got, ok := env.plugins.LookupForPod(ctx, "registry.example.com/app", plain); ok || got != nil {
		t.Errorf("account without the required annotation got %v", got)
	}
	// No pod (the sandbox image) while a service account is required: not run.
	if got, ok := env.plugins.Lookup("registry.example.com/app"); ok || got != nil {
		t.Errorf("pull for no pod got %v", got)
	}
	if n := len(env.runs(t, "test-plugin")); n != 1 {
		t.Errorf("plugin ran %d times, want 1", n)
	}

	// A token the API refuses: the provider contributes nothing, with the error logged.
	accounts.mu.Lock()
	accounts.err = errors.New("forbidden")
	accounts.mu.Unlock()
	if got, ok := env.plugins.LookupForPod(ctx, "registry.example.com/app", pod); ok || got != nil {
		t.Errorf("refused token got %v", got)
	}
	if env.logs.FilterMessage("Failed to provide credentials for image").Len() != 1 {
		t.Errorf("no error logged for the refused token: %v", env.logs.All())
	}
}

// TestPluginServiceAccountTokenCacheToken: with cacheType Token the answer is
// kept per token (each pod's token differs: the plugin runs again), and the
// plugin may answer the token itself as the password.
func TestPluginServiceAccountTokenCacheToken(t *testing.T) {
	t.Parallel()
	env, _ := saEnv(t, "Token")
	ctx := context.Background()
	for i, name := range []string{"web-1", "web-2"} {
		pod := Pod{Namespace: "team", Name: name, UID: types.UID("u" + name), ServiceAccountName: "builder"}
		if got, _ := env.plugins.LookupForPod(ctx, "registry.example.com/app", pod); len(got) != 1 {
			t.Fatalf("pull %d: %v", i, got)
		}
	}
	if n := len(env.runs(t, "test-plugin")); n != 2 {
		t.Errorf("plugin ran %d times, want 2 (one per token)", n)
	}
}

// TestPluginServiceAccountTokenEchoRefused: with cacheType ServiceAccount a
// plugin answering the token as the password is refused, as upstream.
func TestPluginServiceAccountTokenEchoRefused(t *testing.T) {
	t.Parallel()
	env := newPluginEnv(t, testProvider{matchImages: []string{"*.example.com"},
		extra: fmt.Sprintf(saProviderAttrs, "ServiceAccount"),
		response: `{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Registry",` +
			`"auth":{"registry.example.com":{"username":"u","password":"token-team-builder-1"}}}`})
	accounts := &fakeAccounts{accounts: map[string]*v1.ServiceAccount{
		"team/builder": {ObjectMeta: metav1.ObjectMeta{Name: "builder", Namespace: "team", UID: "sa-uid",
			Annotations: map[string]string{"example.com/role": "pull"}}}}}
	env.plugins.UseServiceAccounts(accounts)
	pod := Pod{Namespace: "team", Name: "web-1", UID: "u1", ServiceAccountName: "builder"}
	if got, ok := env.plugins.LookupForPod(context.Background(), "registry.example.com/app", pod); ok || got != nil {
		t.Errorf("echoed token accepted: %v", got)
	}
	if env.logs.FilterMessage("Failed to provide credentials for image").Len() != 1 {
		t.Errorf("no error logged: %v", env.logs.All())
	}
}

func TestTokenAttributesGateOff(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- name: test-plugin\n" +
		"  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  matchImages: [a.example.com]\n  defaultCacheDuration: 1m\n" +
		fmt.Sprintf(saProviderAttrs, "Token")
	writeFile(t, dir+"/config.yaml", cfg)
	_, err := NewPlugins(dir+"/config.yaml", testBinDir, WithServiceAccountTokens(false))
	if err == nil || !strings.Contains(err.Error(), "tokenAttributes is not supported when KubeletServiceAccountTokenForCredentialProviders feature gate is disabled") {
		t.Errorf("gate off: %v", err)
	}
}
