package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/testca"
)

// fakeAuth builds an Auth over an authenticator and an authorizer function.
func fakeAuth(t *testing.T, authn authenticator.RequestFunc, authz authorizer.AuthorizerFunc) *Auth {
	return &Auth{authn: authn, authz: authz, nodeName: "node-a", logger: zaptest.NewLogger(t)}
}

// userIs authenticates every request as u.
func userIs(u user.Info) authenticator.RequestFunc {
	return func(*http.Request) (*authenticator.Response, bool, error) {
		return &authenticator.Response{User: u}, true, nil
	}
}

// allowSubresources allows exactly the named subresources and records what it was asked.
func allowSubresources(asked *[]string, allowed ...string) authorizer.AuthorizerFunc {
	return func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		*asked = append(*asked, a.GetSubresource())
		if slices.Contains(allowed, a.GetSubresource()) {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "no rule", nil
	}
}

func TestFilter(t *testing.T) {
	t.Parallel()
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{"devs", user.AllAuthenticated}}
	for _, tc := range []struct {
		desc       string
		method     string
		target     string
		authn      authenticator.RequestFunc
		allowed    []string // subresources allowed
		authzErr   error
		wantStatus int
		wantBody   string
		wantAsked  []string
		wantPath   string // path next sees (when it is called)
	}{
		{
			desc: "no credentials", method: "GET", target: "/pods",
			authn:      func(*http.Request) (*authenticator.Response, bool, error) { return nil, false, nil },
			wantStatus: http.StatusUnauthorized, wantBody: "Unauthorized\n",
		},
		{
			desc: "invalid credentials", method: "GET", target: "/pods",
			authn: func(*http.Request) (*authenticator.Response, bool, error) {
				return nil, false, errors.New("token expired")
			},
			wantStatus: http.StatusUnauthorized, wantBody: "Unauthorized\n",
		},
		{
			desc: "forbidden exec", method: "POST", target: "/exec/ns/pod/c?command=id", authn: userIs(alice),
			allowed: []string{"stats"}, wantStatus: http.StatusForbidden,
			wantBody:  "Forbidden (user=alice, verb=create, resource=nodes, subresource(s)=[proxy])\n",
			wantAsked: []string{"proxy"},
		},
		{
			desc: "forbidden pods lists both subresources", method: "GET", target: "/pods", authn: userIs(alice),
			wantStatus: http.StatusForbidden,
			wantBody:   "Forbidden (user=alice, verb=get, resource=nodes, subresource(s)=[pods proxy])\n",
			wantAsked:  []string{"pods", "proxy"},
		},
		{
			desc: "stats allowed by nodes/stats", method: "GET", target: "/stats/summary", authn: userIs(alice),
			allowed: []string{"stats"}, wantStatus: http.StatusOK, wantAsked: []string{"stats"}, wantPath: "/stats/summary",
		},
		{
			desc: "pods allowed by nodes/pods alone", method: "GET", target: "/pods", authn: userIs(alice),
			allowed: []string{"pods"}, wantStatus: http.StatusOK, wantAsked: []string{"pods"}, wantPath: "/pods",
		},
		{
			desc: "pods allowed by nodes/proxy", method: "GET", target: "/pods", authn: userIs(alice),
			allowed: []string{"proxy"}, wantStatus: http.StatusOK, wantAsked: []string{"pods", "proxy"}, wantPath: "/pods",
		},
		{
			desc: "escape out of stats is authorized as proxy", method: "POST", target: "/stats/../exec/ns/pod/c", authn: userIs(alice),
			allowed: []string{"stats"}, wantStatus: http.StatusForbidden,
			wantBody:  "Forbidden (user=alice, verb=create, resource=nodes, subresource(s)=[proxy])\n",
			wantAsked: []string{"proxy"},
		},
		{
			desc: "next sees the cleaned path it was authorized for", method: "POST", target: "/stats/../exec/ns/pod/c?command=id", authn: userIs(alice),
			allowed: []string{"proxy"}, wantStatus: http.StatusOK, wantAsked: []string{"proxy"}, wantPath: "/exec/ns/pod/c",
		},
		{
			desc: "authorizer error", method: "GET", target: "/metrics", authn: userIs(alice),
			authzErr: errors.New("apiserver down"), wantStatus: http.StatusInternalServerError,
			wantBody:  "Authorization error (user=alice, verb=get, resource=nodes, subresource=metrics)\n",
			wantAsked: []string{"metrics"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			var asked []string
			authz := allowSubresources(&asked, tc.allowed...)
			if tc.authzErr != nil {
				authz = func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
					asked = append(asked, a.GetSubresource())
					return authorizer.DecisionNoOpinion, "", tc.authzErr
				}
			}
			var gotPath, gotUser string
			called := false
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				called = true
				gotPath = r.URL.Path
				if u, ok := UserFrom(r.Context()); ok {
					gotUser = u.GetName()
				}
				_, _ = w.Write([]byte("data"))
			})
			rec := httptest.NewRecorder()
			fakeAuth(t, tc.authn, authz).Filter(next).ServeHTTP(rec, httptest.NewRequest(tc.method, tc.target, nil))
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d (body %q)", rec.Code, tc.wantStatus, rec.Body.String())
			}
			if !slices.Equal(asked, tc.wantAsked) {
				t.Errorf("authorizer asked for %v, want %v", asked, tc.wantAsked)
			}
			if tc.wantStatus != http.StatusOK {
				if called {
					t.Error("next was called for a refused request")
				}
				if rec.Body.String() != tc.wantBody {
					t.Errorf("body %q, want %q", rec.Body.String(), tc.wantBody)
				}
				return
			}
			if !called || rec.Body.String() != "data" {
				t.Fatalf("next not called (body %q)", rec.Body.String())
			}
			if gotPath != tc.wantPath || gotUser != "alice" {
				t.Errorf("next saw path %q user %q, want %q alice", gotPath, gotUser, tc.wantPath)
			}
		})
	}
}

func TestNewConfigErrors(t *testing.T) {
	t.Parallel()
	client := fake.NewClientset()
	for _, tc := range []struct {
		desc    string
		opts    Options
		wantErr string
	}{
		{desc: "no node name", opts: Options{AuthorizationMode: ModeAlwaysAllow, AnonymousEnabled: true}, wantErr: "NodeName is required"},
		{desc: "no authorization mode", opts: Options{NodeName: "n", AnonymousEnabled: true}, wantErr: "no authorization mode"},
		{desc: "unknown authorization mode", opts: Options{NodeName: "n", AnonymousEnabled: true, AuthorizationMode: "RBAC"}, wantErr: `unknown authorization mode "RBAC"`},
		{desc: "webhook authz without client", opts: Options{NodeName: "n", AnonymousEnabled: true, AuthorizationMode: ModeWebhook}, wantErr: "webhook authorization needs"},
		{desc: "webhook authn without client", opts: Options{NodeName: "n", WebhookAuthnEnabled: true, AuthorizationMode: ModeAlwaysAllow}, wantErr: "webhook authentication needs"},
		{desc: "no authentication method", opts: Options{NodeName: "n", AuthorizationMode: ModeAlwaysAllow}, wantErr: "no authentication method"},
		{desc: "missing client CA file", opts: Options{NodeName: "n", ClientCAFile: "/nonexistent/ca.crt", AuthorizationMode: ModeAlwaysAllow}, wantErr: "/nonexistent/ca.crt"},
		{desc: "webhooks with client", opts: Options{NodeName: "n", Client: client, WebhookAuthnEnabled: true, AuthorizationMode: ModeWebhook}},
		{desc: "anonymous only, always allow", opts: Options{NodeName: "n", AnonymousEnabled: true, AuthorizationMode: ModeAlwaysAllow}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			tc.opts.Logger = zaptest.NewLogger(t)
			a, err := New(tc.opts)
			if tc.wantErr == "" {
				if err != nil || a == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestX509AndAnonymous runs the real delegating authenticator (x509 against
// a CA file, anonymous on or off) behind Filter with AlwaysAllow.
func TestX509AndAnonymous(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testca.New(t, "client-ca")
	caFile := filepath.Join(dir, "ca.crt")
	writeFile(t, caFile, ca.CertPEM)
	good, _ := ca.Issue(t, testca.Cert{CommonName: "kube-apiserver-kubelet-client", Organizations: []string{"system:masters"}})
	other, _ := testca.New(t, "other-ca").Issue(t, testca.Cert{CommonName: "mallory", Organizations: []string{"system:masters"}})
	for _, tc := range []struct {
		desc       string
		anonymous  bool
		peer       []byte // client certificate PEM; nil: none
		wantStatus int
		wantUser   string
		wantGroups []string
	}{
		{desc: "cert from the client CA", peer: good, wantStatus: http.StatusOK, wantUser: "kube-apiserver-kubelet-client",
			wantGroups: []string{"system:masters", user.AllAuthenticated}},
		{desc: "cert from another CA", peer: other, wantStatus: http.StatusUnauthorized},
		{desc: "no cert, anonymous off", wantStatus: http.StatusUnauthorized},
		{desc: "no cert, anonymous on", anonymous: true, wantStatus: http.StatusOK, wantUser: user.Anonymous,
			wantGroups: []string{user.AllUnauthenticated}},
		{desc: "cert from another CA, anonymous on", anonymous: true, peer: other, wantStatus: http.StatusUnauthorized},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			a, err := New(Options{NodeName: "node-a", ClientCAFile: caFile, AnonymousEnabled: tc.anonymous,
				AuthorizationMode: ModeAlwaysAllow, Logger: zaptest.NewLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			var got user.Info
			h := a.Filter(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got, _ = UserFrom(r.Context()) }))
			r := httptest.NewRequest("GET", "/pods", nil)
			r.TLS = &tls.ConnectionState{}
			if tc.peer != nil {
				r.TLS.PeerCertificates = []*x509.Certificate{testca.ParseCert(t, tc.peer)}
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d (%q)", rec.Code, tc.wantStatus, rec.Body.String())
			}
			if tc.wantStatus != http.StatusOK {
				return
			}
			if got == nil || got.GetName() != tc.wantUser || !slices.Equal(got.GetGroups(), tc.wantGroups) {
				t.Errorf("user %v, want %s %v", got, tc.wantUser, tc.wantGroups)
			}
		})
	}
}
