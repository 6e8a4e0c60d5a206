package kubeletserver

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// podRef is the pod (and container) a request's path names.
type podRef struct {
	namespace, pod, container string
	uid                       k8stypes.UID
}

// errInvalidPath is a request path naming something that cannot exist.
var errInvalidPath = errors.New("invalid path")

// parsePodRef reads the {namespace}/{pod}[/{uid}][/{container}] path values and
// checks them: namespace and container must be DNS labels and the pod name a
// DNS subdomain, as the API server enforces, so no value can carry "/" or "..".
func parsePodRef(r *http.Request, withContainer bool) (podRef, error) {
	ref := podRef{
		namespace: r.PathValue("namespace"),
		pod:       r.PathValue("pod"),
		uid:       k8stypes.UID(r.PathValue("uid")),
	}
	if errs := validation.IsDNS1123Label(ref.namespace); len(errs) > 0 {
		return ref, fmt.Errorf("%w: namespace %q: %s", errInvalidPath, ref.namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(ref.pod); len(errs) > 0 {
		return ref, fmt.Errorf("%w: pod name %q: %s", errInvalidPath, ref.pod, strings.Join(errs, "; "))
	}
	if r.PathValue("uid") != "" && !validUID(string(ref.uid)) {
		return ref, fmt.Errorf("%w: pod UID %q", errInvalidPath, ref.uid)
	}
	if withContainer {
		ref.container = r.PathValue("container")
		if errs := validation.IsDNS1123Label(ref.container); len(errs) > 0 {
			return ref, fmt.Errorf("%w: container name %q: %s", errInvalidPath, ref.container, strings.Join(errs, "; "))
		}
	}
	return ref, nil
}

// validUID accepts the UIDs the kubelet meets: UUIDs and hex hashes (static pods).
func validUID(uid string) bool {
	if uid == "" || len(uid) > 128 {
		return false
	}
	for _, c := range uid {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// lookupPod parses the path, finds the pod and, when the path names one, checks
// that the pod has that container. It answers 400 or 404 itself and returns
// ok false then.
func (a *api) lookupPod(w http.ResponseWriter, r *http.Request, withContainer bool) (podRef, *v1.Pod, bool) {
	ref, err := parsePodRef(r, withContainer)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return ref, nil, false
	}
	pod, ok := a.host.GetPodByName(ref.namespace, ref.pod)
	if !ok {
		http.Error(w, fmt.Sprintf("pod %s/%s does not exist", ref.namespace, ref.pod), http.StatusNotFound)
		return ref, nil, false
	}
	if withContainer && !hasContainer(pod, ref.container) {
		http.Error(w, fmt.Sprintf("container %q not found in pod %s/%s", ref.container, ref.namespace, ref.pod), http.StatusNotFound)
		return ref, nil, false
	}
	return ref, pod, true
}

// hasContainer reports whether the pod spec has the container (regular, init
// or ephemeral).
func hasContainer(pod *v1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// statusFor maps a host error to an HTTP status: API statuses (NotFound,
// BadRequest) and the runtime's gRPC codes, else fallback.
func statusFor(err error, fallback int) int {
	switch {
	case apierrors.IsNotFound(err):
		return http.StatusNotFound
	case apierrors.IsBadRequest(err):
		return http.StatusBadRequest
	}
	switch grpcstatus.Code(err) {
	case codes.NotFound:
		return http.StatusNotFound
	case codes.InvalidArgument:
		return http.StatusBadRequest
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	}
	return fallback
}

// writeError answers with err's status (statusFor) and message.
func (a *api) writeError(w http.ResponseWriter, r *http.Request, err error, fallback int) {
	code := statusFor(err, fallback)
	if code >= http.StatusInternalServerError {
		a.logger.Error("Kubelet API request failed", zap.String("path", r.URL.Path), zap.Int("status", code), zap.Error(err))
	}
	http.Error(w, err.Error(), code)
}

// refuseDotSegments answers 400 to a path with a "." or ".." segment (also
// when escaped as %2e or hidden behind %2f) instead of letting the mux clean and
// redirect it: no request may climb out of the path it names.
func refuseDotSegments(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, seg := range strings.Split(r.URL.Path, "/") {
			if seg == "." || seg == ".." {
				http.Error(w, "invalid URL path: dot segments are not allowed", http.StatusBadRequest)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
