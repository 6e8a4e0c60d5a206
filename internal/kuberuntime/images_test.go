package kuberuntime

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testclock "k8s.io/utils/clock/testing"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kuberuntime/pullmanager"
)

// rcImages wraps the fake image service to record pull auths and concurrency.
type rcImages struct {
	*critest.FakeImageService
	mu       sync.Mutex
	auths    []*runtimeapi.AuthConfig
	inFlight int
	maxSeen  int
	hold     func() // runs inside PullImage, outside the lock
	emptyRef bool   // PullImage reports no ref
}

func (f *rcImages) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sb *runtimeapi.PodSandboxConfig) (string, error) {
	f.mu.Lock()
	f.auths = append(f.auths, auth)
	f.inFlight++
	f.maxSeen = max(f.maxSeen, f.inFlight)
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		hold()
	}
	ref, err := f.FakeImageService.PullImage(ctx, image, auth, sb)
	f.mu.Lock()
	f.inFlight--
	f.mu.Unlock()
	if f.emptyRef {
		return "", err
	}
	return ref, err
}

func (f *rcImages) pulls() []*runtimeapi.AuthConfig {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*runtimeapi.AuthConfig(nil), f.auths...)
}

// rcImageEnv is an rcEnv whose image service is an rcImages and whose image pull
// back-off runs on a fake clock.
type rcImageEnv struct {
	*rcEnv
	imgs  *rcImages
	clock *testclock.FakeClock
}

func newRCImageEnv(t *testing.T, mutate ...func(*Options)) *rcImageEnv {
	t.Helper()
	imgs := &rcImages{FakeImageService: critest.NewFakeImageService()}
	clk := testclock.NewFakeClock(time.Now())
	all := append([]func(*Options){func(o *Options) {
		o.Images = imgs
		o.ImagePullBackOff = flowcontrol.NewFakeBackOff(10*time.Second, 300*time.Second, clk)
	}}, mutate...)
	env := newRCEnv(t, all...)
	env.images = imgs.FakeImageService
	return &rcImageEnv{rcEnv: env, imgs: imgs, clock: clk}
}

func rcImagePod(image string, policy v1.PullPolicy) (*v1.Pod, *v1.Container) {
	pod := rcPod("c")
	c := &pod.Spec.Containers[0]
	c.Image, c.ImagePullPolicy = image, policy
	return pod, c
}

func TestEnsureImageExistsPullPolicies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc     string
		image    string
		policy   v1.PullPolicy
		present  bool
		wantPull bool
		wantErr  error
		wantMsg  string
	}{
		{desc: "Always, present", image: "busybox:1.36", policy: v1.PullAlways, present: true, wantPull: true},
		{desc: "Always, absent", image: "busybox:1.36", policy: v1.PullAlways, wantPull: true},
		{desc: "IfNotPresent, present", image: "busybox:1.36", policy: v1.PullIfNotPresent, present: true, wantMsg: `Container image "busybox:1.36" already present on machine`},
		{desc: "IfNotPresent, absent", image: "busybox:1.36", policy: v1.PullIfNotPresent, wantPull: true},
		{desc: "Never, present", image: "busybox:1.36", policy: v1.PullNever, present: true},
		{desc: "Never, absent", image: "busybox:1.36", policy: v1.PullNever, wantErr: kubecontainer.ErrImageNeverPull, wantMsg: `Container image "busybox:1.36" is not present with pull policy of Never`},
		{desc: "unset policy, :latest, present: Always", image: "busybox:latest", present: true, wantPull: true},
		{desc: "unset policy, no tag, present: Always (default tag added)", image: "busybox", present: true, wantPull: true},
		{desc: "unset policy, tagged, present: IfNotPresent", image: "busybox:1.36", present: true},
		{desc: "unset policy, digest, present: IfNotPresent", image: "busybox@sha256:" + strings.Repeat("a", 64), present: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			env := newRCImageEnv(t)
			image := tc.image
			if !strings.ContainsAny(image, ":@") {
				image += ":latest"
			}
			if tc.present {
				env.images.SetFakeImages([]string{image})
			}
			pod, c := rcImagePod(tc.image, tc.policy)
			ref, msg, err := env.m.ensureImageExists(context.Background(), pod, c, nil, nil)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantMsg != "" && msg != tc.wantMsg {
				t.Errorf("message = %q, want %q", msg, tc.wantMsg)
			}
			if pulled := len(env.imgs.pulls()) > 0; pulled != tc.wantPull {
				t.Errorf("pulled = %v, want %v", pulled, tc.wantPull)
			}
			if tc.wantErr == nil && ref != image {
				t.Errorf("ref = %q, want the fake's ID %q", ref, image)
			}
		})
	}
}

func TestEnsureImageExistsInvalidAndInspectErrors(t *testing.T) {
	t.Parallel()
	for _, image := range []string{"", "Busybox", "busybox:", "busybox:bad tag", "busybox@sha256:zz", "a//b", "-lead", strings.Repeat("a", 64)} {
		t.Run("invalid "+image, func(t *testing.T) {
			t.Parallel()
			env := newRCImageEnv(t)
			pod, c := rcImagePod(image, v1.PullIfNotPresent)
			_, msg, err := env.m.ensureImageExists(context.Background(), pod, c, nil, nil)
			if !errors.Is(err, kubecontainer.ErrInvalidImageName) || !strings.Contains(msg, "Failed to apply default image tag") {
				t.Fatalf("err = %v msg %q, want ErrInvalidImageName", err, msg)
			}
			if got := env.recorder.reasons(); !reflect.DeepEqual(got, []string{"InspectFailed"}) {
				t.Errorf("events = %v", got)
			}
		})
	}
	t.Run("image status fails", func(t *testing.T) {
		t.Parallel()
		env := newRCImageEnv(t)
		env.images.InjectError("ImageStatus", errors.New("daemon unreachable"))
		pod, c := rcImagePod("busybox:1.36", v1.PullIfNotPresent)
		_, msg, err := env.m.ensureImageExists(context.Background(), pod, c, nil, nil)
		if !errors.Is(err, kubecontainer.ErrImageInspect) || !strings.Contains(msg, "daemon unreachable") {
			t.Fatalf("err = %v msg %q, want ErrImageInspect", err, msg)
		}
	})
}

func TestEnsureImageExistsBackOff(t *testing.T) {
	t.Parallel()
	env := newRCImageEnv(t)
	pod, c := rcImagePod("busybox:1.36", v1.PullIfNotPresent)
	ctx := context.Background()

	env.images.InjectError("PullImage", errors.New("manifest unknown"))
	_, msg, err := env.m.ensureImageExists(ctx, pod, c, nil, nil)
	if !errors.Is(err, kubecontainer.ErrImagePull) || msg != "manifest unknown" || err.Error() != "manifest unknown" {
		t.Fatalf("first pull: err %v msg %q, want ErrImagePull with the runtime's message", err, msg)
	}
	_, msg, err = env.m.ensureImageExists(ctx, pod, c, nil, nil)
	if !errors.Is(err, kubecontainer.ErrImagePullBackOff) || msg != `Back-off pulling image "busybox:1.36"` {
		t.Fatalf("in back-off: err %v msg %q", err, msg)
	}
	if n := len(env.imgs.pulls()); n != 1 {
		t.Fatalf("%d pulls, want no pull during back-off", n)
	}
	// Another pod is not affected by this pod's back-off.
	other := pod.DeepCopy()
	other.UID = "uid-2"
	if _, _, err := env.m.ensureImageExists(ctx, other, &other.Spec.Containers[0], nil, nil); err != nil {
		t.Fatalf("other pod: %v", err)
	}
	env.images.SetFakeImages(nil)

	env.clock.Step(11 * time.Second)
	ref, _, err := env.m.ensureImageExists(ctx, pod, c, nil, nil)
	if err != nil || ref != "busybox:1.36" {
		t.Fatalf("after back-off: ref %q err %v", ref, err)
	}
	want := []string{"Pulling", "Failed", "BackOff", "Pulling", "Pulled", "Pulling", "Pulled"}
	if got := env.recorder.reasons(); !reflect.DeepEqual(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
}

func TestEnsureImageExistsEmptyRefFromPull(t *testing.T) {
	t.Parallel()
	env := newRCImageEnv(t)
	env.imgs.emptyRef = true
	pod, c := rcImagePod("busybox:1.36", v1.PullAlways)
	ref, _, err := env.m.ensureImageExists(context.Background(), pod, c, nil, nil)
	if err != nil || ref != "busybox:1.36" {
		t.Fatalf("ref %q err %v, want the ref from the image status", ref, err)
	}
}

// rcSecret builds a docker config pull secret with one entry per registry.
func rcSecret(name string, typ v1.SecretType, entries map[string]string) v1.Secret {
	var parts []string
	for reg, userPass := range entries {
		auth := base64.StdEncoding.EncodeToString([]byte(userPass))
		parts = append(parts, fmt.Sprintf("%q:{%q:%q}", reg, "auth", auth))
	}
	body := "{" + strings.Join(parts, ",") + "}"
	s := v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Type: typ, Data: map[string][]byte{}}
	switch typ {
	case v1.SecretTypeDockerConfigJson:
		s.Data[v1.DockerConfigJsonKey] = []byte(`{"auths":` + body + `}`)
	case v1.SecretTypeDockercfg:
		s.Data[v1.DockerConfigKey] = []byte(body)
	}
	return s
}

func TestEnsureImageExistsPullSecrets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc       string
		image      string
		secrets    []v1.Secret
		pullErrors int
		wantUsers  []string // user of each pull attempt ("" anonymous)
		wantErr    error
	}{
		{
			desc:      "matching host and port",
			image:     "127.0.0.1:5000/app:1",
			secrets:   []v1.Secret{rcSecret("s", v1.SecretTypeDockerConfigJson, map[string]string{"127.0.0.1:5000": "alice:pw"})},
			wantUsers: []string{"alice"},
		},
		{
			desc:      "no match: anonymous",
			image:     "127.0.0.1:5001/app:1",
			secrets:   []v1.Secret{rcSecret("s", v1.SecretTypeDockerConfigJson, map[string]string{"127.0.0.1:5000": "alice:pw"})},
			wantUsers: []string{""},
		},
		{
			desc:      "dockercfg secret with a scheme and /v2/",
			image:     "registry.example.com/team/app:1",
			secrets:   []v1.Secret{rcSecret("s", v1.SecretTypeDockercfg, map[string]string{"https://registry.example.com/v2/": "bob:pw"})},
			wantUsers: []string{"bob"},
		},
		{
			desc:      "Docker Hub short name uses index.docker.io credentials",
			image:     "busybox:1.36",
			secrets:   []v1.Secret{rcSecret("s", v1.SecretTypeDockerConfigJson, map[string]string{"https://index.docker.io/v1/": "hub:pw"})},
			wantUsers: []string{"hub"},
		},
		{
			desc:  "most specific path first, then the next on failure",
			image: "quay.io/coreos/etcd:v3",
			secrets: []v1.Secret{
				rcSecret("a", v1.SecretTypeDockerConfigJson, map[string]string{"quay.io": "general:pw"}),
				rcSecret("b", v1.SecretTypeDockerConfigJson, map[string]string{"quay.io/coreos": "coreos:pw"}),
			},
			pullErrors: 1,
			wantUsers:  []string{"coreos", "general"},
		},
		{
			desc:      "glob host",
			image:     "eu.registry.example.com/app:1",
			secrets:   []v1.Secret{rcSecret("s", v1.SecretTypeDockerConfigJson, map[string]string{"*.registry.example.com": "glob:pw"})},
			wantUsers: []string{"glob"},
		},
		{
			desc:      "other secret types are ignored",
			image:     "127.0.0.1:5000/app:1",
			secrets:   []v1.Secret{{Type: v1.SecretTypeOpaque, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte("{}")}}},
			wantUsers: []string{""},
		},
		{
			desc:       "every credential fails",
			image:      "127.0.0.1:5000/app:1",
			secrets:    []v1.Secret{rcSecret("s", v1.SecretTypeDockerConfigJson, map[string]string{"127.0.0.1:5000": "alice:pw", "http://127.0.0.1:5000": "alice2:pw"})},
			pullErrors: 2,
			wantUsers:  []string{"alice", "alice2"},
			wantErr:    kubecontainer.ErrImagePull,
		},
		{
			desc:  "malformed secret",
			image: "127.0.0.1:5000/app:1",
			secrets: []v1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Type: v1.SecretTypeDockerConfigJson,
				Data: map[string][]byte{v1.DockerConfigJsonKey: []byte("{not json")}}},
			wantErr: kubecontainer.ErrImagePull,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			env := newRCImageEnv(t)
			for i := 0; i < tc.pullErrors; i++ {
				env.images.InjectError("PullImage", fmt.Errorf("unauthorized %d", i))
			}
			pod, c := rcImagePod(tc.image, v1.PullAlways)
			_, _, err := env.m.ensureImageExists(context.Background(), pod, c, tc.secrets, nil)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			var users []string
			for _, a := range env.imgs.pulls() {
				users = append(users, a.GetUsername())
				if a != nil && a.GetPassword() != "pw" {
					t.Errorf("password = %q", a.GetPassword())
				}
			}
			if !reflect.DeepEqual(users, tc.wantUsers) {
				t.Errorf("pull users = %v, want %v", users, tc.wantUsers)
			}
		})
	}
}

func TestEnsureImageExistsSerializedPulls(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc      string
		serialize bool
	}{
		{desc: "serialized: one at a time", serialize: true},
		{desc: "parallel", serialize: false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			env := newRCImageEnv(t, func(o *Options) { o.SerializeImagePulls = tc.serialize })
			const n = 3
			var arrived sync.WaitGroup
			arrived.Add(n)
			env.imgs.hold = func() {
				if tc.serialize {
					time.Sleep(20 * time.Millisecond)
					return
				}
				// Parallel pulls all get here together.
				arrived.Done()
				waitTimeout(t, &arrived, 5*time.Second)
			}
			var wg sync.WaitGroup
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					pod, c := rcImagePod(fmt.Sprintf("img%d:1", i), v1.PullAlways)
					if _, _, err := env.m.ensureImageExists(context.Background(), pod, c, nil, nil); err != nil {
						t.Errorf("pull %d: %v", i, err)
					}
				}()
			}
			wg.Wait()
			env.imgs.mu.Lock()
			defer env.imgs.mu.Unlock()
			if tc.serialize && env.imgs.maxSeen != 1 {
				t.Errorf("%d concurrent pulls, want 1", env.imgs.maxSeen)
			}
			if !tc.serialize && env.imgs.maxSeen != n {
				t.Errorf("%d concurrent pulls, want %d", env.imgs.maxSeen, n)
			}
		})
	}
}

func waitTimeout(t *testing.T, wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Errorf("timed out waiting for concurrent pulls")
	}
}

// holdUntil waits, in a fake runtime's call, until cond holds (an error after
// 5 s; t.Fatal is for the test's own goroutine).
func holdUntil(t *testing.T, what string, cond func() bool) {
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("timed out waiting for %s", what)
			return
		}
	}
}

func TestParseImageRef(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, withTag, repo string
	}{
		{in: "busybox", withTag: "busybox:latest", repo: "docker.io/library/busybox"},
		{in: "busybox:1.36", withTag: "busybox:1.36", repo: "docker.io/library/busybox"},
		{in: "library/busybox", withTag: "library/busybox:latest", repo: "docker.io/library/busybox"},
		{in: "docker.io/user/app:v1", withTag: "docker.io/user/app:v1", repo: "docker.io/user/app"},
		{in: "index.docker.io/user/app", withTag: "index.docker.io/user/app:latest", repo: "docker.io/user/app"},
		{in: "registry.k8s.io/pause:3.10", withTag: "registry.k8s.io/pause:3.10", repo: "registry.k8s.io/pause"},
		{in: "localhost/app", withTag: "localhost/app:latest", repo: "localhost/app"},
		{in: "127.0.0.1:5000/a/b-c__d.e:tag_1.0-x", withTag: "127.0.0.1:5000/a/b-c__d.e:tag_1.0-x", repo: "127.0.0.1:5000/a/b-c__d.e"},
		{in: "app@sha256:" + strings.Repeat("0", 64), withTag: "app@sha256:" + strings.Repeat("0", 64), repo: "docker.io/library/app"},
		{in: "kubelet-dockershim/busybox:latest", withTag: "kubelet-dockershim/busybox:latest", repo: "docker.io/kubelet-dockershim/busybox"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			r, err := parseImageRef(tc.in)
			if err != nil {
				t.Fatalf("parseImageRef: %v", err)
			}
			if got := r.withDefaultTag(tc.in); got != tc.withTag {
				t.Errorf("withDefaultTag = %q, want %q", got, tc.withTag)
			}
			if got := r.repository(); got != tc.repo {
				t.Errorf("repository = %q, want %q", got, tc.repo)
			}
		})
	}
}

func TestRegistryMatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		key, repo string
		want      bool
	}{
		{key: "quay.io", repo: "quay.io/coreos/etcd", want: true},
		{key: "quay.io/coreos", repo: "quay.io/coreos/etcd", want: true},
		{key: "quay.io/other", repo: "quay.io/coreos/etcd", want: false},
		{key: "*.example.com", repo: "a.example.com/x", want: true},
		{key: "*.example.com", repo: "a.b.example.com/x", want: false},
		{key: "example.com", repo: "example.com:5000/x", want: false},
		{key: "example.com:5000", repo: "example.com:5000/x", want: true},
		{key: "docker.io", repo: "docker.io/library/busybox", want: true},
		{key: "index.docker.io", repo: "docker.io/library/busybox", want: false},
	} {
		t.Run(tc.key+" "+tc.repo, func(t *testing.T) {
			t.Parallel()
			if got := registryMatches(tc.key, tc.repo); got != tc.want {
				t.Errorf("registryMatches = %v, want %v", got, tc.want)
			}
		})
	}
}

// maxParallelImagePulls bounds the pulls in flight when they are not serialized.
func TestEnsureImageExistsMaxParallelPulls(t *testing.T) {
	t.Parallel()
	env := newRCImageEnv(t, func(o *Options) { o.SerializeImagePulls = false; o.MaxParallelImagePulls = 2 })
	env.imgs.hold = func() {
		// The first pulls wait for each other until two were in flight at
		// once; later ones linger a moment, time for a third to sneak in.
		holdUntil(t, "two pulls in flight", func() bool { env.imgs.mu.Lock(); defer env.imgs.mu.Unlock(); return env.imgs.maxSeen >= 2 })
		time.Sleep(20 * time.Millisecond)
	}
	var wg sync.WaitGroup
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pod, c := rcImagePod(fmt.Sprintf("par%d:1", i), v1.PullAlways)
			if _, _, err := env.m.ensureImageExists(context.Background(), pod, c, nil, nil); err != nil {
				t.Errorf("pull %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	env.imgs.mu.Lock()
	defer env.imgs.mu.Unlock()
	if env.imgs.maxSeen != 2 {
		t.Errorf("%d concurrent pulls, want 2", env.imgs.maxSeen)
	}
}

// registryPullQPS/registryBurst: a pull over the rate fails at once with
// upstream's error (the pull back-off retries it).
func TestEnsureImageExistsPullQPS(t *testing.T) {
	t.Parallel()
	env := newRCImageEnv(t, func(o *Options) { o.PullQPS = 0.01; o.PullBurst = 1 })
	pod, c := rcImagePod("qps0:1", v1.PullAlways)
	if _, _, err := env.m.ensureImageExists(context.Background(), pod, c, nil, nil); err != nil {
		t.Fatalf("first pull: %v", err)
	}
	pod, c = rcImagePod("qps1:1", v1.PullAlways)
	_, msg, err := env.m.ensureImageExists(context.Background(), pod, c, nil, nil)
	if err == nil || !strings.Contains(msg+err.Error(), "pull QPS exceeded") {
		t.Fatalf("second pull: %q %v, want pull QPS exceeded", msg, err)
	}
}

type rcNodeKeyring map[string][]*runtimeapi.AuthConfig

func (k rcNodeKeyring) LookupForPod(_ context.Context, repo string, _ *v1.Pod) ([]NodeCredential, bool) {
	var out []NodeCredential
	for _, a := range k[repo] {
		out = append(out, NodeCredential{Auth: a})
	}
	return out, len(out) > 0
}

// The node's credentials (Docker config files, credential providers) come
// after the pod's pull secrets, and alone when no secret matches.
func TestEnsureImageExistsNodeKeyring(t *testing.T) {
	t.Parallel()
	node := rcNodeKeyring{"127.0.0.1:5000/app": {{Username: "node", Password: "pw"}}}
	for _, tc := range []struct {
		desc       string
		secrets    []v1.Secret
		pullErrors int
		wantUsers  []string
	}{
		{"node credentials alone", nil, 0, []string{"node"}},
		{"pull secret first, then the node's", []v1.Secret{rcSecret("s", v1.SecretTypeDockerConfigJson, map[string]string{"127.0.0.1:5000": "alice:pw"})},
			1, []string{"alice", "node"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			env := newRCImageEnv(t, func(o *Options) { o.NodeKeyring = node })
			for i := 0; i < tc.pullErrors; i++ {
				env.images.InjectError("PullImage", fmt.Errorf("unauthorized %d", i))
			}
			pod, c := rcImagePod("127.0.0.1:5000/app:1", v1.PullAlways)
			if _, _, err := env.m.ensureImageExists(context.Background(), pod, c, tc.secrets, nil); err != nil {
				t.Fatal(err)
			}
			var users []string
			for _, a := range env.imgs.pulls() {
				users = append(users, a.GetUsername())
			}
			if !reflect.DeepEqual(users, tc.wantUsers) {
				t.Errorf("pull users = %v, want %v", users, tc.wantUsers)
			}
		})
	}
}

// prefixImages is an image service that resolves image ID prefixes as Docker
// does ("sha256:3f5e" is any image whose ID starts with 3f5e): what a runtime
// that does not refuse them answers.
type prefixImages struct{ *rcImages }

func (f prefixImages) ImageStatus(ctx context.Context, spec *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	resp, err := f.rcImages.ImageStatus(ctx, spec, verbose)
	if err != nil || resp.GetImage() != nil {
		return resp, err
	}
	f.rcImages.Lock()
	defer f.rcImages.Unlock()
	prefix := strings.TrimPrefix(spec.GetImage(), "sha256:")
	for _, img := range f.Images {
		if strings.HasPrefix(strings.TrimPrefix(img.Id, "sha256:"), prefix) {
			return &runtimeapi.ImageStatusResponse{Image: img}, nil
		}
	}
	return resp, nil
}

// TestEnsureImageExistsIDPrefix: an image the runtime returns for the pod's
// image counts as present only when the pod's image names it (its full ID, a
// repo tag or a repo digest, normalised), so that "image: sha256:3f5e" does not
// run whatever local image's ID starts with 3f5e even on a runtime that
// resolves ID prefixes.
func TestEnsureImageExistsIDPrefix(t *testing.T) {
	t.Parallel()
	id := "sha256:3f5e" + strings.Repeat("0", 60)
	digest := "sha256:" + strings.Repeat("d", 64)
	local := &runtimeapi.Image{Id: id, RepoTags: []string{"docker.io/library/busybox:1.36"}, RepoDigests: []string{"docker.io/library/busybox@" + digest}}
	for _, tc := range []struct {
		desc    string
		image   string
		policy  v1.PullPolicy
		wantRef string
		wantErr error
	}{
		{desc: "sha256 prefix, Never", image: "sha256:3f5e", policy: v1.PullNever, wantErr: kubecontainer.ErrImageNeverPull},
		{desc: "sha256 prefix, IfNotPresent pulls it", image: "sha256:3f5e", policy: v1.PullIfNotPresent, wantRef: "sha256:3f5e"},
		{desc: "63-digit prefix, Never", image: id[:70], policy: v1.PullNever, wantErr: kubecontainer.ErrImageNeverPull},
		{desc: "bare prefix gets :latest", image: "3f5e", policy: v1.PullNever, wantErr: kubecontainer.ErrImageNeverPull},
		{desc: "full ID", image: id, policy: v1.PullNever, wantRef: id},
		{desc: "tag, normalised", image: "busybox:1.36", policy: v1.PullNever, wantRef: id},
		{desc: "digest, normalised", image: "docker.io/busybox@" + digest, policy: v1.PullNever, wantRef: id},
		{desc: "other tag", image: "busybox:1.35", policy: v1.PullNever, wantErr: kubecontainer.ErrImageNeverPull},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			env := newRCImageEnv(t, func(o *Options) { o.Images = prefixImages{o.Images.(*rcImages)} })
			env.images.Lock()
			// The fake looks images up by the exact string asked for.
			env.images.Images = map[string]*runtimeapi.Image{
				id: local, "busybox:1.36": local, "docker.io/busybox@" + digest: local, "busybox:1.35": local,
			}
			env.images.Unlock()
			pod, c := rcImagePod(tc.image, tc.policy)
			ref, _, err := env.m.ensureImageExists(context.Background(), pod, c, nil, nil)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("ensureImageExists(%s) = %q, %v; want %q, %v", tc.image, ref, err, tc.wantRef, tc.wantErr)
			}
			if ref != tc.wantRef {
				t.Errorf("ensureImageExists(%s) ref = %q, want %q", tc.image, ref, tc.wantRef)
			}
		})
	}
}

// With KubeletEnsureSecretPulledImages (a PullRecorder), an image pulled with
// one namespace's secret is not given to a pod without matching credentials:
// it must pull with its own (and fails without), Never refuses it; the same
// credentials in another secret, or an image pulled anonymously, are given
// without a pull.
func TestEnsureImageExistsPullRecords(t *testing.T) {
	t.Parallel()
	policy, err := pullmanager.NewPolicy("", nil)
	if err != nil {
		t.Fatal(err)
	}
	records, err := pullmanager.New(context.Background(), pullmanager.Options{RootDirectory: t.TempDir(), Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	env := newRCImageEnv(t, func(o *Options) { o.PullRecords = records })
	ctx := context.Background()
	secret := func(ns, name, uid string) v1.Secret {
		s := rcSecret(name, v1.SecretTypeDockerConfigJson, map[string]string{"127.0.0.1:5000": "alice:pw"})
		s.Namespace, s.UID = ns, types.UID(uid)
		return s
	}
	podIn := func(ns, image string, policy v1.PullPolicy) (*v1.Pod, *v1.Container) {
		pod, c := rcImagePod(image, policy)
		pod.Namespace, pod.UID = ns, types.UID(ns+"-"+string(policy)+"-"+image)
		return pod, c
	}
	const private = "127.0.0.1:5000/private:1"

	pod, c := podIn("team-a", private, v1.PullIfNotPresent)
	if _, _, err := env.m.ensureImageExists(ctx, pod, c, []v1.Secret{secret("team-a", "pull", "uid-1")}, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(env.imgs.pulls()); n != 1 {
		t.Fatalf("pulls = %d, want 1", n)
	}

	pod, c = podIn("team-b", private, v1.PullIfNotPresent)
	env.images.InjectError("PullImage", errors.New("unauthorized"))
	_, _, err = env.m.ensureImageExists(ctx, pod, c, nil, nil)
	if !errors.Is(err, kubecontainer.ErrImagePull) {
		t.Fatalf("pod without credentials: err = %v, want ErrImagePull", err)
	}
	if p := env.imgs.pulls(); len(p) != 2 || p[1] != nil {
		t.Fatalf("pod without credentials did not pull anonymously: %v", p)
	}

	pod, c = podIn("team-b", private, v1.PullNever)
	_, msg, err := env.m.ensureImageExists(ctx, pod, c, nil, nil)
	if !errors.Is(err, kubecontainer.ErrImageNeverPull) || msg != `Container image "127.0.0.1:5000/private:1" is not present with pull policy of Never` {
		t.Fatalf("Never without credentials: %q, %v", msg, err)
	}

	pod, c = podIn("team-b", private, v1.PullIfNotPresent)
	_, msg, err = env.m.ensureImageExists(ctx, pod, c, []v1.Secret{secret("team-b", "copy", "uid-2")}, nil)
	if err != nil || msg != `Container image "127.0.0.1:5000/private:1" already present on machine and can be accessed by the pod` {
		t.Fatalf("same credentials in another secret: %q, %v", msg, err)
	}
	if n := len(env.imgs.pulls()); n != 2 {
		t.Fatalf("pulls = %d, want no new pull", n)
	}

	const public = "127.0.0.1:5001/public:1"
	pod, c = podIn("team-a", public, v1.PullIfNotPresent)
	if _, _, err := env.m.ensureImageExists(ctx, pod, c, nil, nil); err != nil {
		t.Fatal(err)
	}
	pod, c = podIn("team-b", public, v1.PullNever)
	if _, _, err := env.m.ensureImageExists(ctx, pod, c, nil, nil); err != nil {
		t.Fatalf("image pulled anonymously refused to another pod: %v", err)
	}
}
