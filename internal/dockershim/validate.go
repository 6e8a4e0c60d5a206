package dockershim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/distribution/reference"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
)

// The one check of what a CRI client sends, run at the shim's gRPC edge
// (EdgeInterceptor) before any handler, so that nothing unchecked reaches the
// Docker API (whose paths embed IDs and image references) or a path on disk:
//
//   - container and sandbox IDs are Docker's hex form: 64 lowercase hex digits
//     or a prefix of them (Docker resolves a unique prefix);
//   - an image is, in this order, an image ID (sha256:<64 hex> or 64 hex), a
//     digest reference, or a name that parses under the reference grammar
//     (so no ".." segments, "?", "#", spaces or control characters);
//   - required messages and sub-messages are present;
//   - a container's log_path stays inside its sandbox's log_directory;
//   - DNS servers are IP addresses, and DNS searches and options hold no
//     white space or control characters (each becomes one resolv.conf line);
//   - a sandbox's hostname is an RFC 1123 host name of at most 64 characters,
//     its sysctl names follow upstream's grammar (no path: they become files
//     under /proc/sys) with values free of control characters;
//   - CRI label keys are not the shim's own Docker labels, do not collide with
//     an annotation as stored (annotation.<key>), and hold no ',' (the shim
//     lists them in one label), white space or control characters.
//
// Every refusal is InvalidArgument naming the field, but for the idempotent
// deletes: StopPodSandbox, RemovePodSandbox, StopContainer and RemoveContainer
// of an ID that is not in Docker's hex form succeed without reaching Docker,
// as for any ID that names nothing (the CRI contract; critest's Idempotence
// specs stop and remove random UUIDs).

// dockerID matches a Docker container ID or a prefix of one.
var dockerID = regexp.MustCompile(`^[0-9a-f]{1,64}$`)

// hostname matches an RFC 1123 host name (labels of letters, digits and '-').
var hostname = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*$`)

// sysctlName is upstream's sysctl name grammar (dots or slashes between parts).
var sysctlName = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

// imageID matches an image ID without (64 hex) or with its algorithm.
var imageID = regexp.MustCompile(`^(sha256:)?[0-9a-f]{64}$`)

// checkID checks a required container or sandbox ID.
func checkID(field, id string) error {
	if id == "" {
		return invalidArg(field, "must not be empty")
	}
	return checkOptionalID(field, id)
}

// errMalformedID marks an ID that cannot name any container.
var errMalformedID = errors.New("not a container ID (1 to 64 lowercase hex digits)")

// checkOptionalID checks an ID that may be empty (a list filter).
func checkOptionalID(field, id string) error {
	if id != "" && !dockerID.MatchString(id) {
		return fmt.Errorf("%w: %s: %q is %w", ErrInvalidArgument, field, id, errMalformedID)
	}
	return nil
}

// idempotentNoop returns the empty response of a stop or remove whose ID is
// malformed (it names nothing, so there is nothing to do), and false for
// every other refusal.
func idempotentNoop(req any, err error) (any, bool) {
	if !errors.Is(err, errMalformedID) {
		return nil, false
	}
	switch req.(type) {
	case *runtimeapi.StopPodSandboxRequest:
		return &runtimeapi.StopPodSandboxResponse{}, true
	case *runtimeapi.RemovePodSandboxRequest:
		return &runtimeapi.RemovePodSandboxResponse{}, true
	case *runtimeapi.StopContainerRequest:
		return &runtimeapi.StopContainerResponse{}, true
	case *runtimeapi.RemoveContainerRequest:
		return &runtimeapi.RemoveContainerResponse{}, true
	}
	return nil, false
}

// checkImage checks a required image reference.
func checkImage(field string, img *runtimeapi.ImageSpec) error {
	if img.GetImage() == "" { // a missing image spec included
		return invalidArg(field+".image", "must not be empty")
	}
	if u := img.GetUserSpecifiedImage(); u != "" {
		if err := checkImageRef(field+".user_specified_image", u); err != nil {
			return err
		}
	}
	return checkImageRef(field+".image", img.GetImage())
}

// checkImageRef checks an image ID, a digest reference or a named reference,
// in that order.
func checkImageRef(field, ref string) error {
	if imageID.MatchString(ref) {
		return nil
	}
	// The parse checks a digest reference's digest too.
	if _, err := reference.ParseNormalizedNamed(ref); err != nil {
		return invalidArg(field, "%q is neither an image ID nor a valid image reference: %v", ref, err)
	}
	return nil
}

// checkLogPath keeps a container's log path (relative to the sandbox's log
// directory) inside that directory.
func checkLogPath(field, p string) error {
	if p == "" {
		return nil
	}
	if !filepath.IsLocal(p) || filepath.Clean(p) == "." || hasControl(p) {
		return invalidArg(field, "%q must be a relative path inside the sandbox's log_directory", p)
	}
	return nil
}

// checkDNS checks what becomes resolv.conf lines.
func checkDNS(field string, dns *runtimeapi.DNSConfig) error {
	for _, s := range dns.GetServers() {
		if _, err := netip.ParseAddr(s); err != nil {
			return invalidArg(field+".servers", "%q is not an IP address", s)
		}
	}
	for _, list := range []struct {
		name   string
		values []string
	}{{"searches", dns.GetSearches()}, {"options", dns.GetOptions()}} {
		for _, v := range list.values {
			if v == "" || strings.IndexFunc(v, unicode.IsSpace) >= 0 || hasControl(v) {
				return invalidArg(field+"."+list.name, "%q must be one word without white space or control characters", v)
			}
		}
	}
	return nil
}

func hasControl(s string) bool { return strings.IndexFunc(s, unicode.IsControl) >= 0 }

// checkSandboxConfig checks a sandbox configuration.
func checkSandboxConfig(field string, cfg *runtimeapi.PodSandboxConfig) error {
	if cfg == nil {
		return invalidArg(field, "must be set")
	}
	if cfg.GetMetadata() == nil {
		return invalidArg(field+".metadata", "must be set")
	}
	if d := cfg.GetLogDirectory(); d != "" && (!filepath.IsAbs(d) || filepath.Clean(d) != d || hasControl(d)) {
		return invalidArg(field+".log_directory", "%q must be a clean absolute path", d)
	}
	if p := cfg.GetLinux().GetCgroupParent(); p != "" && (!path.IsAbs(p) || path.Clean(p) != p || hasControl(p) || strings.ContainsAny(p, ": ")) {
		return invalidArg(field+".linux.cgroup_parent", "%q must be a clean absolute cgroup path", p)
	}
	if h := cfg.GetHostname(); h != "" && (len(h) > 64 || !hostname.MatchString(h)) {
		return invalidArg(field+".hostname", "%q is not a host name (RFC 1123, at most 64 characters)", h)
	}
	for name, value := range cfg.GetLinux().GetSysctls() {
		if len(name) > 253 || !sysctlName.MatchString(name) || hasControl(value) {
			return invalidArg(field+".linux.sysctls", "%q=%q is not a sysctl setting", name, value)
		}
	}
	if err := checkLabelKeys(field+".labels", cfg.GetLabels(), cfg.GetAnnotations()); err != nil {
		return err
	}
	return checkDNS(field+".dns_config", cfg.GetDnsConfig())
}

// checkLabelKeys keeps CRI label keys out of the shim's own Docker labels and
// apart from the annotations stored beside them (annotation.<key>).
func checkLabelKeys(field string, labels, annotations map[string]string) error {
	for k := range labels {
		if k == "" || internalLabel(k) || strings.ContainsRune(k, ',') ||
			strings.IndexFunc(k, unicode.IsSpace) >= 0 || hasControl(k) {
			return invalidArg(field, "key %q is reserved by the shim or holds ',', white space or control characters", k)
		}
		if a, ok := strings.CutPrefix(k, annotationPrefix); ok {
			if _, clash := annotations[a]; clash {
				return invalidArg(field, "key %q collides with the annotation %q as the shim stores it", k, a)
			}
		}
	}
	return nil
}

// checkCreateContainer checks a CreateContainer request.
func checkCreateContainer(r *runtimeapi.CreateContainerRequest) error {
	if err := checkID("pod_sandbox_id", r.GetPodSandboxId()); err != nil {
		return err
	}
	cfg := r.GetConfig()
	if cfg == nil {
		return invalidArg("config", "must be set")
	}
	if cfg.GetMetadata() == nil {
		return invalidArg("config.metadata", "must be set")
	}
	if err := checkImage("config.image", cfg.GetImage()); err != nil {
		return err
	}
	if err := checkLabelKeys("config.labels", cfg.GetLabels(), cfg.GetAnnotations()); err != nil {
		return err
	}
	if err := checkLogPath("config.log_path", cfg.GetLogPath()); err != nil {
		return err
	}
	if err := checkUnified("config.linux.resources.unified", cfg.GetLinux().GetResources().GetUnified()); err != nil {
		return err
	}
	if err := checkOptionalID("config.linux.security_context.namespace_options.target_id",
		cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetTargetId()); err != nil {
		return err
	}
	return checkSandboxConfig("sandbox_config", r.GetSandboxConfig())
}

// checkUnified checks CRI unified resources (cgroups.CheckUnified).
func checkUnified(field string, kv map[string]string) error {
	if err := cgroups.CheckUnified(kv); err != nil {
		return invalidArg(field, "%v", err)
	}
	return nil
}

// validateRequest checks one CRI request; see the comment at the top.
func validateRequest(req any) error {
	switch r := req.(type) {
	case *runtimeapi.RunPodSandboxRequest:
		return checkSandboxConfig("config", r.GetConfig())
	case *runtimeapi.CreateContainerRequest:
		return checkCreateContainer(r)
	case *runtimeapi.UpdateContainerResourcesRequest:
		if err := checkID("container_id", r.GetContainerId()); err != nil {
			return err
		}
		return checkUnified("linux.unified", r.GetLinux().GetUnified())
	case interface{ GetPodSandboxId() string }:
		// Stop/Remove/Status/Stats of a sandbox, PortForward,
		// UpdatePodSandboxResources, CheckpointPod.
		return checkID("pod_sandbox_id", r.GetPodSandboxId())
	case interface{ GetContainerId() string }:
		// Start/Stop/Remove/Status/Stats/UpdateResources/ReopenLog of a
		// container, ExecSync, Exec, Attach, CheckpointContainer.
		return checkID("container_id", r.GetContainerId())
	case interface{ GetImage() *runtimeapi.ImageSpec }:
		// PullImage, ImageStatus, RemoveImage.
		return checkImage("image", r.GetImage())
	case interface {
		GetFilter() *runtimeapi.PodSandboxFilter
	}:
		return checkOptionalID("filter.id", r.GetFilter().GetId())
	case interface {
		GetFilter() *runtimeapi.PodSandboxStatsFilter
	}:
		return checkOptionalID("filter.id", r.GetFilter().GetId())
	case interface {
		GetFilter() *runtimeapi.ContainerFilter
	}:
		return checkFilterIDs(r.GetFilter().GetId(), r.GetFilter().GetPodSandboxId())
	case interface {
		GetFilter() *runtimeapi.ContainerStatsFilter
	}:
		return checkFilterIDs(r.GetFilter().GetId(), r.GetFilter().GetPodSandboxId())
	case interface {
		GetFilter() *runtimeapi.ImageFilter
	}:
		if img := r.GetFilter().GetImage().GetImage(); img != "" {
			return checkImageRef("filter.image.image", img)
		}
	}
	return nil
}

func checkFilterIDs(id, sandboxID string) error {
	if err := checkOptionalID("filter.id", id); err != nil {
		return err
	}
	return checkOptionalID("filter.pod_sandbox_id", sandboxID)
}

// EdgeInterceptor is the shim's gRPC edge for unary calls: it validates the
// request (validateRequest) before the handler runs and converts the
// handler's errors to gRPC codes (ToGRPC).
func EdgeInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if err := validateRequest(req); err != nil {
			if resp, ok := idempotentNoop(req, err); ok {
				return resp, nil
			}
			return nil, ToGRPC(err)
		}
		resp, err := h(ctx, req)
		return resp, ToGRPC(err)
	}
}

// StreamEdgeInterceptor is EdgeInterceptor for server-streaming calls: the
// request is validated as the handler receives it.
func StreamEdgeInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return ToGRPC(h(srv, validatingStream{ss}))
	}
}

// validatingStream validates every message a streaming handler receives.
type validatingStream struct{ grpc.ServerStream }

func (s validatingStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return validateRequest(m)
}

// seconds converts a CRI timeout in seconds to a duration, clamped to what a
// time.Duration holds (a huge timeout must not overflow into a negative one,
// which would mean an immediate kill); negative is 0.
func seconds(n int64) time.Duration {
	const maxSeconds = int64(math.MaxInt64 / int64(time.Second))
	switch {
	case n <= 0:
		return 0
	case n > maxSeconds:
		return time.Duration(maxSeconds) * time.Second
	}
	return time.Duration(n) * time.Second
}

// validCDIName reports whether name is a fully qualified CDI device name,
// vendor.com/class=name, as the CDI parser checks them: a vendor of letters,
// digits, '.', '-' and '_', a class of letters, digits, '.', '-' and '_',
// both beginning with a letter and ending with a letter or digit, and a
// device name of letters, digits, '-', '_', '.' and ':' beginning and ending
// with a letter or digit.
func validCDIName(name string) bool {
	kind, dev, ok := strings.Cut(name, "=")
	if !ok {
		return false
	}
	vendor, class, ok := strings.Cut(kind, "/")
	return ok && cdiPart(vendor, ".-_", true) && cdiPart(class, ".-_", true) && cdiPart(dev, "-_.:", false)
}

// cdiPart checks one part: letters, digits and extra, beginning with a letter
// (letterFirst) or digit, ending with a letter or digit.
func cdiPart(s, extra string, letterFirst bool) bool {
	if s == "" || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) || letterFirst && !isLetter(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && !strings.ContainsRune(extra, rune(s[i])) {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
