package kuberuntime

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kuberuntime/pullmanager"
)

// Image event reasons (the upstream kubelet's).
const (
	imageEventPulling     = "Pulling"
	imageEventPulled      = "Pulled"
	imageEventFailed      = "Failed"
	imageEventBackOff     = "BackOff"
	imageEventInspectFail = "InspectFailed"
	imageEventNeverPull   = "ErrImageNeverPull"
)

// ensureImageExists makes sure the container's image is on the node, following the
// container's pull policy, and returns its image ref (the runtime's image ID). Steps:
//  1. validate the image name and add the default tag;
//  2. ask the runtime whether the image is present;
//  3. decide from the pull policy; an image present and not to be pulled is
//     used when the pod may use it: with KubeletEnsureSecretPulledImages (a
//     PullRecorder), the pod's credentials must match those that pulled it,
//     unless the verification policy spares the image (pullRecordsAllow);
//  4. Never without a usable image: ErrImageNeverPull;
//  5. record the pull intent, then refuse while the (pod, image) pair is in
//     pull back-off (ErrImagePullBackOff);
//  6. pull, with the pod's pull secrets matching the registry, then the node's
//     credentials, one pull at a time when pulls are serialized; a failure
//     (ErrImagePull) extends the back-off; a success records the credentials
//     that pulled.
//
// message is a human-readable explanation for the container's state; err matches one
// of kubecontainer.ErrInvalidImageName, ErrImageInspect, ErrImageNeverPull,
// ErrImagePullBackOff and ErrImagePull.
func (m *Manager) ensureImageExists(ctx context.Context, pod *v1.Pod, container *v1.Container, pullSecrets []v1.Secret, sandboxConfig *runtimeapi.PodSandboxConfig) (imageRef, message string, err error) {
	requested := container.Image
	ref, err := parseImageRef(requested)
	policy := imagePullPolicy(container, ref)
	var presentLocally, pullRequired *bool
	defer func() { m.metrics.ensureImageRequest(policy, presentLocally, pullRequired) }()
	if err != nil {
		msg := fmt.Sprintf("Failed to apply default image tag %q: %v", requested, err)
		m.imageEvent(pod, v1.EventTypeWarning, imageEventInspectFail, msg)
		return "", msg, newReasonError(kubecontainer.ErrInvalidImageName, err, "%s", msg)
	}
	image := ref.withDefaultTag(requested)
	spec := &runtimeapi.ImageSpec{Image: image, Annotations: pod.Annotations, UserSpecifiedImage: requested}

	present, err := m.lookupImageRef(ctx, spec)
	if err != nil {
		msg := fmt.Sprintf("Failed to inspect image %q: %v", image, err)
		m.imageEvent(pod, v1.EventTypeWarning, imageEventInspectFail, msg)
		return "", msg, newReasonError(kubecontainer.ErrImageInspect, err, "%s", msg)
	}
	if policy != v1.PullAlways { // upstream does not look for the image then
		presentLocally = ptr.To(present != "")
	}
	creds := sync.OnceValues(func() ([]pullCredential, error) { return m.pullCredentials(ctx, pod, ref, pullSecrets) })
	if present != "" && !shouldPullImage(policy, true) {
		pullRequired = ptr.To(false)
		allowed, err := m.pullRecordsAllow(requested, present, creds)
		if err != nil {
			pullRequired = nil
			return "", err.Error(), newReasonError(kubecontainer.ErrImagePull, err, "%s", err.Error())
		}
		if allowed {
			msg := fmt.Sprintf("Container image %q already present on machine", requested)
			if m.pullRecords != nil {
				msg += " and can be accessed by the pod"
			}
			m.imageEvent(pod, v1.EventTypeNormal, imageEventPulled, msg)
			// Ends a pull of the pod's still counted as running (another
			// container's, which a third pod's pull made unnecessary), as
			// upstream's image manager does.
			m.startup.RecordImageFinishedPulling(pod.UID)
			return present, msg, nil
		}
	}
	if policy == v1.PullNever && present == "" {
		pullRequired = nil // upstream's precheck ends before deciding
	} else {
		pullRequired = ptr.To(true)
	}
	if policy == v1.PullNever {
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", requested)
		m.imageEvent(pod, v1.EventTypeWarning, imageEventNeverPull, msg)
		return "", msg, newReasonError(kubecontainer.ErrImageNeverPull, nil, "%s", msg)
	}
	candidates, err := creds()
	if err != nil {
		return "", err.Error(), newReasonError(kubecontainer.ErrImagePull, err, "%s", err.Error())
	}
	return m.pullAndRecord(ctx, pod, requested, spec, candidates, sandboxConfig)
}

// pullRecordsAllow says whether the pod may use the image present as
// imageRef without pulling it (always, without KubeletEnsureSecretPulledImages).
func (m *Manager) pullRecordsAllow(requested, imageRef string, creds func() ([]pullCredential, error)) (bool, error) {
	if m.pullRecords == nil {
		return true, nil
	}
	must, err := m.pullRecords.MustAttemptImagePull(requested, imageRef, func() ([]pullmanager.Secret, *pullmanager.ServiceAccount, error) {
		list, err := creds()
		if err != nil {
			return nil, nil, err
		}
		var secrets []pullmanager.Secret
		var account *pullmanager.ServiceAccount
		for _, c := range list {
			switch {
			case c.secret != nil:
				secrets = append(secrets, *c.secret)
			case c.account != nil && account == nil:
				account = c.account
			}
		}
		return secrets, account, nil
	})
	return !must, err
}

// pullAndRecord pulls the image with the pull intent recorded around it (with
// KubeletEnsureSecretPulledImages), unless the (pod, image) pair is in
// back-off, and reports the pull as events, metrics and the pod's startup.
func (m *Manager) pullAndRecord(ctx context.Context, pod *v1.Pod, requested string, spec *runtimeapi.ImageSpec, creds []pullCredential, sandboxConfig *runtimeapi.PodSandboxConfig) (string, string, error) {
	var pulled pullResult
	if m.pullRecords != nil {
		if err := m.pullRecords.RecordPullIntent(requested); err != nil {
			msg := fmt.Sprintf("Failed to record image pull intent for container image %q: %v", requested, err)
			return "", msg, newReasonError(kubecontainer.ErrImagePull, err, "%s", msg)
		}
		defer func() {
			if pulled.ref != "" {
				m.pullRecords.RecordImagePulled(requested, pulled.ref, pulled.used.record())
			} else {
				m.pullRecords.RecordImagePullFailed(requested)
			}
		}()
	}
	backOffKey := string(pod.UID) + "_" + spec.Image
	if bo := m.imagePullBackOff; bo != nil && bo.IsInBackOffSinceUpdate(backOffKey, bo.Clock.Now()) {
		msg := fmt.Sprintf("Back-off pulling image %q", requested)
		m.imageEvent(pod, v1.EventTypeNormal, imageEventBackOff, msg)
		return "", msg, newReasonError(kubecontainer.ErrImagePullBackOff, nil, "%s", msg)
	}

	m.startup.RecordImageStartedPulling(pod.UID)
	m.imageEvent(pod, v1.EventTypeNormal, imageEventPulling, fmt.Sprintf("Pulling image %q", requested))
	start := time.Now()
	res, err := m.pullImage(ctx, spec, creds, sandboxConfig)
	if err != nil {
		m.imageEvent(pod, v1.EventTypeWarning, imageEventFailed, fmt.Sprintf("Failed to pull image %q: %v", requested, err))
		if bo := m.imagePullBackOff; bo != nil {
			bo.Next(backOffKey, bo.Clock.Now())
		}
		return "", err.Error(), newReasonError(kubecontainer.ErrImagePull, err, "%s", err.Error())
	}
	pulled = res
	m.startup.RecordImageFinishedPulling(pod.UID)
	took := time.Since(start).Truncate(time.Millisecond)
	m.metrics.imagePullDuration.WithLabelValues(imageSizeBucket(pulled.size)).Observe(took.Seconds())
	m.imageEvent(pod, v1.EventTypeNormal, imageEventPulled,
		fmt.Sprintf("Successfully pulled image %q in %v (%v including waiting). Image size: %v bytes.",
			requested, pulled.took.Truncate(time.Millisecond), took, pulled.size))
	if bo := m.imagePullBackOff; bo != nil {
		bo.GC()
	}
	return pulled.ref, "", nil
}

// lookupImageRef returns the runtime's ID of the image, or "" when it is absent.
func (m *Manager) lookupImageRef(ctx context.Context, spec *runtimeapi.ImageSpec) (string, error) {
	img, err := m.imageStatus(ctx, spec)
	if err != nil {
		return "", err
	}
	return img.GetId(), nil
}

// imageStatus returns the runtime's image for spec, nil when it has none or
// answered with an image spec does not name (imageNamedBy).
func (m *Manager) imageStatus(ctx context.Context, spec *runtimeapi.ImageSpec) (*runtimeapi.Image, error) {
	resp, err := m.images.ImageStatus(ctx, spec, false)
	if err != nil {
		return nil, err
	}
	if img := resp.GetImage(); img != nil && imageNamedBy(img, spec.GetImage()) {
		return img, nil
	}
	return nil, nil
}

// imageNamedBy reports whether the image reference ref names img: its full ID,
// one of its repo tags or, for a reference with a digest, one of its repo
// digests (names compared fully qualified). Docker takes a name it has no tag
// for as an image ID prefix ("sha256:3f5e", the repository "sha256" to the pod
// spec, is any local image whose ID starts with 3f5e); without this check a
// runtime that answers so would let a pod run an image it only guessed a few
// hex digits of.
func imageNamedBy(img *runtimeapi.Image, ref string) bool {
	if ref == img.GetId() || "sha256:"+ref == img.GetId() {
		return true
	}
	want, err := parseImageRef(ref)
	if err != nil {
		return false
	}
	names, key := img.GetRepoTags(), func(r imageRefParts) string { return r.repository() + ":" + r.tag }
	if want.digest != "" {
		names, key = img.GetRepoDigests(), func(r imageRefParts) string { return r.repository() + "@" + r.digest }
	} else if want.tag == "" {
		want.tag = "latest"
	}
	for _, n := range names {
		if got, err := parseImageRef(n); err == nil && key(got) == key(want) {
			return true
		}
	}
	return false
}

// pullResult is a successful pull: the image ref the runtime reports, the
// image's size (0: unknown), how long the pull took, not counting the wait
// for a pull slot, and the credentials that pulled (nil: none).
type pullResult struct {
	ref  string
	size uint64
	took time.Duration
	used *pullCredential
}

// pullCredential is one candidate credential of a pull, with where it came
// from: a pod's pull secret (with the hash of its credentials), a credential
// provider given the pod's service account token, or (neither) the node.
type pullCredential struct {
	auth    *runtimeapi.AuthConfig
	secret  *pullmanager.Secret
	account *pullmanager.ServiceAccount
}

// record is what the pull records keep of the credentials that pulled:
// none or the node's make the image usable by every pod on the node.
func (c *pullCredential) record() *pullmanager.Credentials {
	switch {
	case c == nil:
		return &pullmanager.Credentials{NodePodsAccessible: true}
	case c.secret != nil:
		return &pullmanager.Credentials{KubernetesSecrets: []pullmanager.Secret{*c.secret}}
	case c.account != nil:
		return &pullmanager.Credentials{KubernetesServiceAccounts: []pullmanager.ServiceAccount{*c.account}}
	}
	return &pullmanager.Credentials{NodePodsAccessible: true}
}

// pullCredentials returns the credentials to try for the image: the pull
// secrets that match its registry (most specific first), then the node's.
func (m *Manager) pullCredentials(ctx context.Context, pod *v1.Pod, ref imageRefParts, secrets []v1.Secret) ([]pullCredential, error) {
	creds, err := credentialsForImage(secrets, ref.repository())
	if err != nil {
		return nil, err
	}
	if m.nodeKeyring != nil {
		if node, ok := m.nodeKeyring.LookupForPod(ctx, ref.repository(), pod); ok {
			for _, c := range node {
				creds = append(creds, pullCredential{auth: c.Auth, account: c.ServiceAccount})
			}
		}
	}
	return creds, nil
}

// pullImage pulls the image, trying each credential in turn until one works;
// without any it pulls anonymously. The ref is the one the runtime reports
// (from the pull, else from the image status).
func (m *Manager) pullImage(ctx context.Context, spec *runtimeapi.ImageSpec, creds []pullCredential, sandboxConfig *runtimeapi.PodSandboxConfig) (pullResult, error) {
	if m.pullSlots != nil {
		select {
		case m.pullSlots <- struct{}{}:
			defer func() { <-m.pullSlots }()
		case <-ctx.Done():
			return pullResult{}, ctx.Err()
		}
	}
	tries := make([]*pullCredential, 0, len(creds))
	for i := range creds {
		tries = append(tries, &creds[i])
	}
	if len(tries) == 0 {
		tries = append(tries, nil)
	}
	start := time.Now()
	var errs []error
	for _, cred := range tries {
		// Every pull counts against registryPullQPS, as upstream's throttled
		// image service.
		if m.pullLimiter != nil && !m.pullLimiter.TryAccept() {
			errs = append(errs, errPullQPSExceeded)
			continue
		}
		var auth *runtimeapi.AuthConfig
		if cred != nil {
			auth = cred.auth
		}
		imageRef, err := m.images.PullImage(ctx, spec, auth, sandboxConfig)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		took := time.Since(start)
		// The image's status gives its size (and the ref when the pull did
		// not), as upstream's puller asks for it after each pull.
		img, err := m.imageStatus(ctx, spec)
		switch {
		case imageRef != "":
		case err != nil:
			return pullResult{}, fmt.Errorf("inspect pulled image %q: %w", spec.Image, err)
		case img == nil:
			return pullResult{}, fmt.Errorf("image %q is not present after a successful pull", spec.Image)
		default:
			imageRef = img.GetId()
		}
		return pullResult{ref: imageRef, size: img.GetSize(), took: took, used: cred}, nil
	}
	return pullResult{}, errors.Join(errs...)
}

// NodeKeyring answers the node's registry credentials for an image
// repository (e.g. docker.io/library/busybox) pulled for pod, most specific
// first; credential providers that take a service account token use the
// pod's, and say so (ServiceAccount).
type NodeKeyring interface {
	LookupForPod(ctx context.Context, repository string, pod *v1.Pod) ([]NodeCredential, bool)
}

// NodeCredential is one credential of the node keyring.
type NodeCredential struct {
	Auth *runtimeapi.AuthConfig
	// ServiceAccount is the pod's service account whose token a credential
	// provider exchanged for Auth; nil for the node's own credentials.
	ServiceAccount *pullmanager.ServiceAccount
}

// PullRecorder keeps the records of KubeletEnsureSecretPulledImages
// (pullmanager.Manager).
type PullRecorder interface {
	RecordPullIntent(image string) error
	RecordImagePulled(image, imageRef string, creds *pullmanager.Credentials)
	RecordImagePullFailed(image string)
	MustAttemptImagePull(image, imageRef string, creds pullmanager.PodCredentials) (bool, error)
}

// errPullQPSExceeded is upstream's error for a pull over registryPullQPS.
var errPullQPSExceeded = errors.New("pull QPS exceeded")

// pullSlots is the semaphore that bounds the pulls in flight: one with
// serializeImagePulls, maxParallel without (nil, no bound, when 0).
func pullSlots(serialize bool, maxParallel int) chan struct{} {
	switch {
	case serialize:
		return make(chan struct{}, 1)
	case maxParallel > 0:
		return make(chan struct{}, maxParallel)
	}
	return nil
}

// imageEvent records an event about the pod's image, when a recorder is set.
func (m *Manager) imageEvent(pod *v1.Pod, eventType, reason, msg string) {
	if m.recorder != nil {
		m.recorder.Eventf(pod, eventType, reason, "%s", msg)
	}
}

// imagePullPolicy returns the container's pull policy; unset, it is the API default:
// Always for a :latest or untagged image, IfNotPresent otherwise.
func imagePullPolicy(container *v1.Container, ref imageRefParts) v1.PullPolicy {
	if container.ImagePullPolicy != "" {
		return container.ImagePullPolicy
	}
	if ref.digest == "" && (ref.tag == "" || ref.tag == "latest") {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}

// shouldPullImage applies a pull policy.
func shouldPullImage(policy v1.PullPolicy, present bool) bool {
	switch policy {
	case v1.PullNever:
		return false
	case v1.PullAlways:
		return true
	}
	return !present // IfNotPresent and unknown policies
}

// Image reference grammar (the distribution/reference one): name[:tag][@digest].
var (
	domainRE   = regexp.MustCompile(`^(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?$`)
	pathCompRE = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)
	tagRE      = regexp.MustCompile(`^[\w][\w.-]{0,127}$`)
	digestRE   = regexp.MustCompile(`^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,}$`)
	hex64RE    = regexp.MustCompile(`^[a-f0-9]{64}$`)
)

// maxNameSize is the longest repository name allowed.
const maxNameSize = 255

// imageRefParts is a parsed image reference.
type imageRefParts struct {
	domain string // "" for Docker Hub short names
	path   string
	tag    string
	digest string
}

// parseImageRef validates an image reference and splits it.
func parseImageRef(s string) (imageRefParts, error) {
	var r imageRefParts
	if s == "" {
		return r, errors.New("image name is empty")
	}
	name := s
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name, r.digest = name[:i], name[i+1:]
		if !digestRE.MatchString(r.digest) {
			return r, fmt.Errorf("invalid digest %q", r.digest)
		}
	}
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name, r.tag = name[:i], name[i+1:]
		if !tagRE.MatchString(r.tag) {
			return r, fmt.Errorf("invalid tag %q", r.tag)
		}
	}
	if len(name) > maxNameSize {
		return r, fmt.Errorf("repository name must not be more than %d characters", maxNameSize)
	}
	if hex64RE.MatchString(name) {
		return r, fmt.Errorf("invalid repository name (%s), cannot specify 64-byte hexadecimal strings", name)
	}
	first, rest, found := strings.Cut(name, "/")
	if found && (strings.ContainsAny(first, ".:") || first == "localhost" || strings.ToLower(first) != first) {
		if !domainRE.MatchString(first) {
			return r, fmt.Errorf("invalid registry %q", first)
		}
		r.domain, name = first, rest
	}
	for _, comp := range strings.Split(name, "/") {
		if !pathCompRE.MatchString(comp) {
			return r, fmt.Errorf("invalid reference format: repository name %q must be lowercase alphanumerics separated by '.', '_', '__' or '-'", name)
		}
	}
	r.path = name
	return r, nil
}

// withDefaultTag returns image with ":latest" appended when it has neither tag nor
// digest. The name is not qualified otherwise, so the runtime sees what the pod says.
func (r imageRefParts) withDefaultTag(image string) string {
	if r.tag == "" && r.digest == "" {
		return image + ":latest"
	}
	return image
}

// repository returns the fully qualified repository (docker.io/library/busybox for
// busybox), which pull secrets are matched against.
func (r imageRefParts) repository() string {
	domain, path := r.domain, r.path
	if domain == "" || domain == "index.docker.io" {
		domain = "docker.io"
	}
	if domain == "docker.io" && !strings.Contains(path, "/") {
		path = "library/" + path
	}
	return domain + "/" + path
}

// dockerConfigEntry is one registry's entry of a .dockercfg or .dockerconfigjson.
type dockerConfigEntry struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Auth          string `json:"auth,omitempty"`
	Email         string `json:"email,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
	RegistryToken string `json:"registrytoken,omitempty"`
}

// defaultRegistryKey is the key of Docker Hub credentials.
const defaultRegistryKey = "index.docker.io"

// credentialsForImage returns the credentials of the pull secrets (of type
// kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg) that match repo, most
// specific registry path first; Docker Hub images also match index.docker.io.
func credentialsForImage(secrets []v1.Secret, repo string) ([]pullCredential, error) {
	creds := map[string][]pullCredential{}
	for i := range secrets {
		entries, err := secretDockerConfig(&secrets[i])
		if err != nil {
			return nil, err
		}
		locs := make([]string, 0, len(entries))
		for loc := range entries {
			locs = append(locs, loc)
		}
		sort.Strings(locs)
		for _, loc := range locs {
			key, ok := credentialKey(loc)
			if !ok {
				continue
			}
			auth, err := entries[loc].authConfig(key)
			if err != nil {
				return nil, fmt.Errorf("pull secret %s/%s, registry %q: %w", secrets[i].Namespace, secrets[i].Name, loc, err)
			}
			creds[key] = append(creds[key], pullCredential{auth: auth, secret: &pullmanager.Secret{
				UID: string(secrets[i].UID), Namespace: secrets[i].Namespace, Name: secrets[i].Name,
				CredentialHash: credentialHash(auth, entries[loc].Email),
			}})
		}
	}
	keys := make([]string, 0, len(creds))
	for k := range creds {
		keys = append(keys, k)
	}
	// More specific paths sort after their prefixes; reversed, they are tried first.
	sort.Sort(sort.Reverse(sort.StringSlice(keys)))
	var out []pullCredential
	for _, k := range keys {
		if registryMatches(k, repo) {
			out = append(out, creds[k]...)
		}
	}
	if len(out) == 0 && strings.HasPrefix(repo, "docker.io/") {
		out = creds[defaultRegistryKey]
	}
	return out, nil
}

// credentialHash is upstream's hash of a secret's credentials: the hex
// SHA-256 of the JSON of its user name, password and email (what pull
// records compare).
func credentialHash(auth *runtimeapi.AuthConfig, email string) string {
	data, err := json.Marshal(struct {
		Username string `json:"username,omitempty"`
		Password string `json:"password,omitempty"`
		Email    string `json:"email,omitempty"`
	}{auth.Username, auth.Password, email})
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%x", sha256.Sum256(data))
}

// secretDockerConfig decodes the registry entries of a docker config pull secret;
// other secrets have none.
func secretDockerConfig(s *v1.Secret) (map[string]dockerConfigEntry, error) {
	switch {
	case s.Type == v1.SecretTypeDockerConfigJson && len(s.Data[v1.DockerConfigJsonKey]) > 0:
		var cfg struct {
			Auths map[string]dockerConfigEntry `json:"auths"`
		}
		if err := json.Unmarshal(s.Data[v1.DockerConfigJsonKey], &cfg); err != nil {
			return nil, fmt.Errorf("pull secret %s/%s: decode %s: %w", s.Namespace, s.Name, v1.DockerConfigJsonKey, err)
		}
		return cfg.Auths, nil
	case s.Type == v1.SecretTypeDockercfg && len(s.Data[v1.DockerConfigKey]) > 0:
		var cfg map[string]dockerConfigEntry
		if err := json.Unmarshal(s.Data[v1.DockerConfigKey], &cfg); err != nil {
			return nil, fmt.Errorf("pull secret %s/%s: decode %s: %w", s.Namespace, s.Name, v1.DockerConfigKey, err)
		}
		return cfg, nil
	}
	return nil, nil
}

// authConfig converts the entry; "auth" (base64 user:password) wins over the
// username and password fields, as in Docker.
func (e dockerConfigEntry) authConfig(serverAddress string) (*runtimeapi.AuthConfig, error) {
	auth := &runtimeapi.AuthConfig{
		Username:      e.Username,
		Password:      e.Password,
		ServerAddress: serverAddress,
		IdentityToken: e.IdentityToken,
		RegistryToken: e.RegistryToken,
	}
	if e.Auth != "" {
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(e.Auth))
		if err != nil {
			return nil, fmt.Errorf("decode auth field: %w", err)
		}
		user, pass, ok := strings.Cut(string(raw), ":")
		if !ok {
			return nil, errors.New("auth field must be base64 of username:password")
		}
		auth.Username, auth.Password = user, pass
	}
	return auth, nil
}

// credentialKey normalizes a docker config location ("https://host:port/v1/",
// "host/path", "*.example.com") to host[/path], with /v1/ and /v2/ meaning the host.
func credentialKey(loc string) (string, bool) {
	value := loc
	if !strings.HasPrefix(value, "https://") && !strings.HasPrefix(value, "http://") {
		value = "https://" + value
	}
	u, err := url.Parse(value)
	if err != nil || u.Host == "" {
		return "", false
	}
	path := u.Path
	if strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/v2/") {
		path = path[3:]
	}
	if path == "" || path == "/" {
		return u.Host, true
	}
	return u.Host + path, true
}

// registryMatches reports whether the credential key (host[:port][/path], where host
// labels may be globs like *.example.com) matches the repository: same port, same
// number of host labels each matching, and the key's path a prefix of the repo's.
func registryMatches(key, repo string) bool {
	kHost, kPath, _ := strings.Cut(key, "/")
	rHost, rPath, _ := strings.Cut(repo, "/")
	kLabels, kPort := splitHostPort(kHost)
	rLabels, rPort := splitHostPort(rHost)
	if kPort != rPort || len(kLabels) != len(rLabels) {
		return false
	}
	if !strings.HasPrefix("/"+rPath, "/"+kPath) {
		return false
	}
	for i := range kLabels {
		if ok, err := filepath.Match(kLabels[i], rLabels[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

// splitHostPort splits host[:port] into its dot-separated labels and port.
func splitHostPort(hostport string) ([]string, string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	return strings.Split(host, "."), port
}
