package volumes

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func ptrTo[T any](v T) *T { return &v }

// newObjectsManager returns a Manager over a fake API; it does no I/O until a volume
// is written.
func newObjectsManager(t *testing.T) (*Manager, *fakeObjects, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	objs := newFakeObjects(clk)
	m, err := New(Options{
		PodsDir: "/nonexistent/pods", Objects: objs, Clock: clk, Logger: zaptest.NewLogger(t),
		Allocatable: fixedAllocatable{v1.ResourceMemory: resource.MustParse("1Gi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return m, objs, clk
}

// payloadStrings renders a payload as path -> "mode:data" for comparisons.
func payloadStrings(p map[string]fileProjection) map[string]string {
	out := make(map[string]string, len(p))
	for k, v := range p {
		out[k] = fmt.Sprintf("%o:%s", v.Mode, v.Data)
	}
	return out
}

func TestConfigMapAndSecretPayload(t *testing.T) {
	t.Parallel()
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"},
		Data: map[string]string{"a": "1", "b": "2"}, BinaryData: map[string][]byte{"bin": {0, 1}}}
	sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"}, Data: map[string][]byte{"user": []byte("u")}}
	for _, tc := range []struct {
		desc        string
		secret      bool
		items       []v1.KeyToPath
		defaultMode int32
		optional    bool
		want        map[string]string
		wantErr     string
	}{
		{desc: "all keys with the default mode", defaultMode: 0o644,
			want: map[string]string{"a": "644:1", "b": "644:2", "bin": "644:\x00\x01"}},
		{desc: "defaultMode", defaultMode: 0o400, want: map[string]string{"a": "400:1", "b": "400:2", "bin": "400:\x00\x01"}},
		{desc: "items with paths and modes", defaultMode: 0o644,
			items: []v1.KeyToPath{{Key: "a", Path: "dir/a.txt", Mode: ptrTo(int32(0o600))}, {Key: "bin", Path: "./raw"}},
			want:  map[string]string{"dir/a.txt": "600:1", "raw": "644:\x00\x01"}},
		{desc: "missing key", defaultMode: 0o644, items: []v1.KeyToPath{{Key: "a", Path: "a"}, {Key: "zz", Path: "z"}},
			wantErr: `configmap "cfg" references non-existent config key: zz`},
		{desc: "missing key, optional", defaultMode: 0o644, optional: true,
			items: []v1.KeyToPath{{Key: "a", Path: "a"}, {Key: "zz", Path: "z"}}, want: map[string]string{"a": "644:1"}},
		{desc: "secret keys", secret: true, defaultMode: 0o644, want: map[string]string{"user": "644:u"}},
		{desc: "secret missing key", secret: true, defaultMode: 0o644, items: []v1.KeyToPath{{Key: "pass", Path: "p"}},
			wantErr: `secret "sec" references non-existent secret key: pass`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			var got map[string]fileProjection
			var err error
			if tc.secret {
				got, err = secretPayload(sec, tc.items, tc.defaultMode, tc.optional)
			} else {
				got, err = configMapPayload(cm, tc.items, tc.defaultMode, tc.optional)
			}
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := payloadStrings(got); !reflect.DeepEqual(s, tc.want) {
				t.Errorf("payload %q, want %q", s, tc.want)
			}
		})
	}
}

func TestCollectObjectVolumes(t *testing.T) {
	t.Parallel()
	m, objs, _ := newObjectsManager(t)
	objs.addConfigMap("shop", "cfg", map[string]string{"k": "v"}, nil)
	objs.addSecret("shop", "sec", map[string][]byte{"pw": []byte("x")})
	cmVol := func(name string, optional bool, items ...v1.KeyToPath) v1.VolumeSource {
		return v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: name}, Optional: &optional, Items: items}}
	}
	secVol := func(name string, optional bool) v1.VolumeSource {
		return v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: name, Optional: &optional, DefaultMode: ptrTo(int32(0o440))}}
	}
	for _, tc := range []struct {
		desc         string
		src          v1.VolumeSource
		want         map[string]string
		wantErr      string
		wantNotFound bool
	}{
		{desc: "configMap", src: cmVol("cfg", false), want: map[string]string{"k": "644:v"}},
		{desc: "missing configMap", src: cmVol("nope", false), wantErr: `configmap "nope" not found`, wantNotFound: true},
		{desc: "missing optional configMap is empty", src: cmVol("nope", true, v1.KeyToPath{Key: "k", Path: "k"}), want: map[string]string{}},
		{desc: "optional configMap missing key", src: cmVol("cfg", true, v1.KeyToPath{Key: "zz", Path: "z"}), want: map[string]string{}},
		{desc: "secret with defaultMode", src: secVol("sec", false), want: map[string]string{"pw": "440:x"}},
		{desc: "missing secret", src: secVol("nope", false), wantErr: `secret "nope" not found`, wantNotFound: true},
		{desc: "missing optional secret", src: secVol("nope", true), want: map[string]string{}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := newPodWithVolumes("uid-collect", v1.Volume{Name: "v", VolumeSource: tc.src})
			ov := m.collectObjectVolumes(context.Background(), pod)["v"]
			if ov == nil {
				t.Fatal("volume not collected")
			}
			if tc.wantErr != "" {
				if ov.err == nil || ov.err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", ov.err, tc.wantErr)
				}
				if apierrors.IsNotFound(ov.err) != tc.wantNotFound {
					t.Errorf("IsNotFound(%v) = %v", ov.err, !tc.wantNotFound)
				}
				return
			}
			if ov.err != nil {
				t.Fatal(ov.err)
			}
			if s := payloadStrings(ov.payload); !reflect.DeepEqual(s, tc.want) {
				t.Errorf("payload %q, want %q", s, tc.want)
			}
		})
	}
}

func TestCollectObjectVolumesAPIError(t *testing.T) {
	t.Parallel()
	m, objs, _ := newObjectsManager(t)
	objs.setErr(errors.New("connection refused"))
	pod := newPodWithVolumes("uid-err", v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Optional: ptrTo(true)}}})
	ov := m.collectObjectVolumes(context.Background(), pod)["v"]
	if ov.err == nil || apierrors.IsNotFound(ov.err) || !strings.Contains(ov.err.Error(), "get configmap shop/cfg: connection refused") {
		t.Fatalf("err = %v: an optional source must not hide API errors", ov.err)
	}
}

func TestCollectObjectVolumesWithoutObjects(t *testing.T) {
	t.Parallel()
	m, err := New(Options{PodsDir: "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	pod := newPodWithVolumes("uid", v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}})
	if got := m.collectObjectVolumes(context.Background(), pod); got != nil {
		t.Fatalf("collected %v without Objects", got)
	}
}

// kubeAPIAccess is the volume the ServiceAccount admission plugin adds to API pods.
func kubeAPIAccess() v1.Volume {
	return v1.Volume{Name: "kube-api-access-x7k2p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		DefaultMode: ptrTo(int32(0o644)),
		Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{ExpirationSeconds: ptrTo(int64(3607)), Path: "token"}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}}}
}

func TestCollectProjectedKubeAPIAccess(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc      string
		fsGroup   *int64
		wantToken string
	}{
		{desc: "defaultMode", wantToken: "644:token-1"},
		{desc: "fsGroup makes the token 0600", fsGroup: ptrTo(int64(1000)), wantToken: "600:token-1"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			m, objs, _ := newObjectsManager(t)
			objs.addConfigMap("shop", "kube-root-ca.crt", map[string]string{"ca.crt": "PEM"}, nil)
			pod := newPodWithVolumes("uid-kaa", kubeAPIAccess())
			pod.Spec.ServiceAccountName = "default"
			if tc.fsGroup != nil {
				pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: tc.fsGroup}
			}
			ov := m.collectObjectVolumes(context.Background(), pod)["kube-api-access-x7k2p"]
			if ov.err != nil {
				t.Fatal(ov.err)
			}
			want := map[string]string{"token": tc.wantToken, "ca.crt": "644:PEM", "namespace": "644:shop"}
			if s := payloadStrings(ov.payload); !reflect.DeepEqual(s, want) {
				t.Errorf("payload %q, want %q", s, want)
			}
			if !ov.tmpfs || ov.pluginDir != ProjectedPluginDir {
				t.Errorf("projected volume: tmpfs %v dir %s", ov.tmpfs, ov.pluginDir)
			}
			reqs := objs.tokenRequests()
			if len(reqs) != 1 || objs.tokenSAs[0] != "shop/default" {
				t.Fatalf("token requests %v for %v", reqs, objs.tokenSAs)
			}
			wantSpec := authenticationv1.TokenRequestSpec{
				ExpirationSeconds: ptrTo(int64(3607)),
				BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "uid-kaa"},
			}
			if !reflect.DeepEqual(reqs[0].Spec, wantSpec) {
				t.Errorf("token request spec %+v, want %+v", reqs[0].Spec, wantSpec)
			}
		})
	}
}

func TestCollectProjectedErrors(t *testing.T) {
	t.Parallel()
	m, objs, _ := newObjectsManager(t)
	objs.addSecret("shop", "sec", map[string][]byte{"a": []byte("1")})
	pod := newPodWithVolumes("uid-perr", v1.Volume{Name: "p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{
			{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "gone-too"}, Optional: ptrTo(true)}},
			{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Path: "b"}},
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}},
		},
	}}})
	ov := m.collectObjectVolumes(context.Background(), pod)["p"]
	if ov.err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`configmap "gone" not found`,
		"clusterTrustBundle projections need the API server",
		`serviceAccountToken "token": the pod has no service account`,
	} {
		if !strings.Contains(ov.err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, ov.err)
		}
	}
	if strings.Contains(ov.err.Error(), "gone-too") {
		t.Errorf("optional source reported: %v", ov.err)
	}
}

func TestTokenRequestFor(t *testing.T) {
	t.Parallel()
	pod := newPodWithVolumes("uid-tr")
	req := tokenRequestFor(pod, &v1.ServiceAccountTokenProjection{Audience: "vault", Path: "t"})
	want := authenticationv1.TokenRequestSpec{
		Audiences:         []string{"vault"},
		ExpirationSeconds: ptrTo(int64(3600)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "uid-tr"},
	}
	if !reflect.DeepEqual(req.Spec, want) {
		t.Errorf("spec %+v, want %+v", req.Spec, want)
	}
}

func newPodWithVolumes(uid string, vols ...v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: k8stypes.UID(uid)},
		Spec:       v1.PodSpec{Volumes: vols, Containers: []v1.Container{{Name: "app", Image: "busybox"}}},
	}
}
