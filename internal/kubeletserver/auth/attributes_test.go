package auth

import (
	"net/http/httptest"
	"slices"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
)

func TestAllRequestAttributes(t *testing.T) {
	t.Parallel()
	u := &user.DefaultInfo{Name: "alice", Groups: []string{"devs"}}
	for _, tc := range []struct {
		desc, method, target string
		wantVerb             string
		wantPath             string
		wantSubresources     []string
	}{
		{desc: "GET stats summary", method: "GET", target: "/stats/summary", wantVerb: "get", wantPath: "/stats/summary", wantSubresources: []string{"stats"}},
		{desc: "stats root without slash", method: "GET", target: "/stats", wantVerb: "get", wantPath: "/stats", wantSubresources: []string{"stats"}},
		{desc: "query ignored", method: "GET", target: "/stats/summary?only_cpu_and_memory=true&x=/exec", wantVerb: "get", wantPath: "/stats/summary", wantSubresources: []string{"stats"}},
		{desc: "prefix is not a path element", method: "GET", target: "/statsfoo", wantVerb: "get", wantPath: "/statsfoo", wantSubresources: []string{"proxy"}},
		{desc: "metrics", method: "GET", target: "/metrics", wantVerb: "get", wantPath: "/metrics", wantSubresources: []string{"metrics"}},
		{desc: "metrics resource", method: "GET", target: "/metrics/resource", wantVerb: "get", wantPath: "/metrics/resource", wantSubresources: []string{"metrics"}},
		{desc: "metrics probes", method: "GET", target: "/metrics/probes", wantVerb: "get", wantPath: "/metrics/probes", wantSubresources: []string{"metrics"}},
		{desc: "logs", method: "GET", target: "/logs/syslog", wantVerb: "get", wantPath: "/logs/syslog", wantSubresources: []string{"log"}},
		{desc: "container logs are proxy", method: "GET", target: "/containerLogs/ns/pod/c?follow=true", wantVerb: "get", wantPath: "/containerLogs/ns/pod/c", wantSubresources: []string{"proxy"}},
		{desc: "checkpoint", method: "POST", target: "/checkpoint/ns/pod/c", wantVerb: "create", wantPath: "/checkpoint/ns/pod/c", wantSubresources: []string{"checkpoint"}},
		{desc: "exec POST", method: "POST", target: "/exec/ns/pod/c?command=ls", wantVerb: "create", wantPath: "/exec/ns/pod/c", wantSubresources: []string{"proxy"}},
		{desc: "exec GET (websocket)", method: "GET", target: "/exec/ns/pod/c", wantVerb: "get", wantPath: "/exec/ns/pod/c", wantSubresources: []string{"proxy"}},
		{desc: "attach", method: "POST", target: "/attach/ns/pod/c", wantVerb: "create", wantPath: "/attach/ns/pod/c", wantSubresources: []string{"proxy"}},
		{desc: "portForward", method: "POST", target: "/portForward/ns/pod", wantVerb: "create", wantPath: "/portForward/ns/pod", wantSubresources: []string{"proxy"}},
		{desc: "run", method: "POST", target: "/run/ns/pod/c", wantVerb: "create", wantPath: "/run/ns/pod/c", wantSubresources: []string{"proxy"}},
		{desc: "pods fine-grained", method: "GET", target: "/pods", wantVerb: "get", wantPath: "/pods", wantSubresources: []string{"pods", "proxy"}},
		{desc: "runningpods fine-grained", method: "GET", target: "/runningpods/", wantVerb: "get", wantPath: "/runningpods/", wantSubresources: []string{"pods", "proxy"}},
		{desc: "healthz fine-grained", method: "GET", target: "/healthz/ping", wantVerb: "get", wantPath: "/healthz/ping", wantSubresources: []string{"healthz", "proxy"}},
		{desc: "configz fine-grained", method: "GET", target: "/configz", wantVerb: "get", wantPath: "/configz", wantSubresources: []string{"configz", "proxy"}},
		{desc: "flagz is configz", method: "GET", target: "/flagz", wantVerb: "get", wantPath: "/flagz", wantSubresources: []string{"configz"}},
		{desc: "statusz", method: "GET", target: "/statusz", wantVerb: "get", wantPath: "/statusz", wantSubresources: []string{"statusz"}},
		{desc: "pprof is proxy", method: "GET", target: "/debug/pprof/heap", wantVerb: "get", wantPath: "/debug/pprof/heap", wantSubresources: []string{"proxy"}},
		{desc: "PUT", method: "PUT", target: "/x", wantVerb: "update", wantPath: "/x", wantSubresources: []string{"proxy"}},
		{desc: "PATCH", method: "PATCH", target: "/x", wantVerb: "patch", wantPath: "/x", wantSubresources: []string{"proxy"}},
		{desc: "DELETE", method: "DELETE", target: "/x", wantVerb: "delete", wantPath: "/x", wantSubresources: []string{"proxy"}},
		{desc: "HEAD has no verb", method: "HEAD", target: "/stats/summary", wantVerb: "", wantPath: "/stats/summary", wantSubresources: []string{"stats"}},
		{desc: "dot-dot escape out of stats", method: "POST", target: "/stats/../exec/ns/pod/c", wantVerb: "create", wantPath: "/exec/ns/pod/c", wantSubresources: []string{"proxy"}},
		{desc: "encoded dot-dot escape", method: "GET", target: "/stats/%2E%2E/exec/ns/pod/c", wantVerb: "get", wantPath: "/exec/ns/pod/c", wantSubresources: []string{"proxy"}},
		{desc: "encoded slash escape", method: "GET", target: "/metrics%2F..%2Fpods", wantVerb: "get", wantPath: "/pods", wantSubresources: []string{"pods", "proxy"}},
		{desc: "double slashes", method: "GET", target: "//stats//summary", wantVerb: "get", wantPath: "/stats/summary", wantSubresources: []string{"stats"}},
		{desc: "dot elements", method: "GET", target: "/./logs/./x/", wantVerb: "get", wantPath: "/logs/x/", wantSubresources: []string{"log"}},
		{desc: "escape above root", method: "GET", target: "/../../stats", wantVerb: "get", wantPath: "/stats", wantSubresources: []string{"stats"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(tc.method, tc.target, nil)
			attrs := AllRequestAttributes(u, r, "node-a")
			var subs []string
			for _, a := range attrs {
				subs = append(subs, a.GetSubresource())
				if a.GetVerb() != tc.wantVerb || a.GetPath() != tc.wantPath {
					t.Errorf("verb %q path %q, want %q %q", a.GetVerb(), a.GetPath(), tc.wantVerb, tc.wantPath)
				}
				if a.GetUser() != u || a.GetResource() != "nodes" || a.GetName() != "node-a" || a.GetAPIVersion() != "v1" ||
					a.GetAPIGroup() != "" || a.GetNamespace() != "" || !a.IsResourceRequest() {
					t.Errorf("attributes %+v", a)
				}
			}
			if !slices.Equal(subs, tc.wantSubresources) {
				t.Errorf("subresources %v, want %v", subs, tc.wantSubresources)
			}
			single := RequestAttributes(u, r, "node-a")
			if want := tc.wantSubresources[len(tc.wantSubresources)-1]; single.GetSubresource() != want {
				t.Errorf("RequestAttributes subresource %q, want %q", single.GetSubresource(), want)
			}
		})
	}
}

func TestCleanPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ desc, in, want string }{
		{desc: "empty", in: "", want: "/"},
		{desc: "root", in: "/", want: "/"},
		{desc: "relative", in: "stats", want: "/stats"},
		{desc: "trailing slash kept", in: "/runningpods/", want: "/runningpods/"},
		{desc: "dot-dot to root keeps no double slash", in: "/stats/../", want: "/"},
		{desc: "dot-dot", in: "/a/b/../c", want: "/a/c"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := cleanPath(tc.in); got != tc.want {
				t.Errorf("cleanPath(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
