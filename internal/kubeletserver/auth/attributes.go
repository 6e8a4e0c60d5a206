package auth

import (
	"net/http"
	"path"
	"strings"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Subresources of nodes that the kubelet API authorizes (upstream names).
const (
	SubresourceProxy      = "proxy"
	SubresourceStats      = "stats"
	SubresourceMetrics    = "metrics"
	SubresourceLog        = "log"
	SubresourceCheckpoint = "checkpoint"
	SubresourceStatusz    = "statusz"
	SubresourcePods       = "pods"
	SubresourceHealthz    = "healthz"
	SubresourceConfigz    = "configz"
)

// RequestAttributes returns the coarse authorization attributes of a request
// to the kubelet API (upstream GetRequestAttributes without the fine-grained
// subresources): verb from the method (POST create, GET get, PUT update,
// PATCH patch, DELETE delete, anything else ""), API version v1, resource
// nodes, name nodeName, and subresource by the cleaned path: /stats stats,
// /metrics metrics, /logs log, /checkpoint checkpoint, /statusz statusz,
// /flagz configz, else proxy. The query is ignored. A user allowed these
// attributes is allowed the request.
func RequestAttributes(u user.Info, r *http.Request, nodeName string) authorizer.Attributes {
	attrs := AllRequestAttributes(u, r, nodeName)
	return attrs[len(attrs)-1]
}

// AllRequestAttributes returns the attributes Filter authorizes, in order; the
// request is allowed when any of them is. They differ only by subresource:
// /pods, /allocatedPods and /runningpods get pods then proxy, /healthz healthz then proxy,
// /configz configz then proxy (upstream fine-grained kubelet authorization);
// every other path gets RequestAttributes' single subresource, which is also
// always the last one. The list is never empty.
func AllRequestAttributes(u user.Info, r *http.Request, nodeName string) []authorizer.Attributes {
	p := cleanPath(r.URL.Path)
	record := authorizer.AttributesRecord{
		User:            u,
		Verb:            apiVerb(r.Method),
		APIVersion:      "v1",
		Resource:        "nodes",
		Name:            nodeName,
		ResourceRequest: true,
		Path:            p,
	}
	var subresources []string
	if s := fineGrainedSubresource(p); s != "" {
		subresources = append(subresources, s)
	}
	subresources = append(subresources, coarseSubresource(p))
	attrs := make([]authorizer.Attributes, 0, len(subresources))
	for _, s := range subresources {
		a := record
		a.Subresource = s
		attrs = append(attrs, a)
	}
	return attrs
}

// fineGrainedSubresource is the subresource tried before the coarse one for
// p, or "" (upstream KubeletFineGrainedAuthz, GA and locked on since 1.36).
func fineGrainedSubresource(p string) string {
	switch {
	case isSubpath(p, "/pods"), isSubpath(p, "/allocatedPods"), isSubpath(p, "/runningpods"):
		return SubresourcePods
	case isSubpath(p, "/healthz"):
		return SubresourceHealthz
	case isSubpath(p, "/configz"):
		return SubresourceConfigz
	}
	return ""
}

// coarseSubresource is the subresource that alone allows a request for p.
func coarseSubresource(p string) string {
	switch {
	case isSubpath(p, "/stats"):
		return SubresourceStats
	case isSubpath(p, "/metrics"):
		return SubresourceMetrics
	case isSubpath(p, "/logs"):
		// "log" as for the other log subresources (pods/log).
		return SubresourceLog
	case isSubpath(p, "/checkpoint"):
		return SubresourceCheckpoint
	case isSubpath(p, "/statusz"):
		return SubresourceStatusz
	case isSubpath(p, "/flagz"):
		return SubresourceConfigz
	}
	return SubresourceProxy
}

// apiVerb maps an HTTP method to the API verb authorized for it.
func apiVerb(method string) string {
	switch method {
	case http.MethodPost:
		return "create"
	case http.MethodGet:
		return "get"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return ""
}

// isSubpath reports whether p is prefix or lies below it.
func isSubpath(p, prefix string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	return p == prefix || (strings.HasPrefix(p, prefix) && p[len(prefix)] == '/')
}

// cleanPath is the canonical form of a request path, as net/http's ServeMux
// computes it: rooted, without . and .. elements or repeated slashes, with a
// trailing slash kept. Authorization looks at this form, and the handler
// receives it, so that /stats/../exec is authorized and served as /exec.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}
