package apiobjects

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func newTestObjects(t *testing.T, objs ...runtime.Object) (*Objects, *fake.Clientset, *clocktesting.FakeClock) {
	t.Helper()
	return newStrategyObjects(t, StrategyCache, objs...)
}

func newStrategyObjects(t *testing.T, strategy string, objs ...runtime.Object) (*Objects, *fake.Clientset, *clocktesting.FakeClock) {
	t.Helper()
	client := fake.NewClientset(objs...)
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	o, err := New(Options{Client: client, Strategy: strategy, Clock: clk, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return o, client, clk
}

// gets counts the GET actions on resource.
func gets(client *fake.Clientset, resource string) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

func podWith(uid, ns string, configMaps, secrets []string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p-" + uid, UID: k8stypes.UID(uid)}}
	c := v1.Container{Name: "c"}
	for _, n := range configMaps {
		c.EnvFrom = append(c.EnvFrom, v1.EnvFromSource{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: n}}})
	}
	for _, n := range secrets {
		c.EnvFrom = append(c.EnvFrom, v1.EnvFromSource{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: n}}})
	}
	p.Spec.Containers = []v1.Container{c}
	return p
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		opts Options
	}{
		{desc: "no client", opts: Options{}},
		{desc: "unknown strategy", opts: Options{Client: fake.NewClientset(), Strategy: "Poll"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if _, err := New(tc.opts); err == nil {
				t.Fatal("New succeeded")
			}
		})
	}
}

// The Cache strategy: a registered object's read is reused for the TTL
// (the Node's annotation, else a minute); a pod registering it again
// forgets the read; a missing object stays missing for the TTL; other
// errors are not kept.
func TestCacheStrategy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", ResourceVersion: "1"}, Data: map[string]string{"k": "1"}}
	o, client, clk := newTestObjects(t, cm)
	o.RegisterPod(podWith("u1", "ns", []string{"a", "missing"}, nil))
	read := func(want string) {
		t.Helper()
		got, err := o.GetConfigMap(ctx, "ns", "a")
		if err != nil || got.Data["k"] != want {
			t.Fatalf("GetConfigMap = %v, %v; want k=%s", got, err, want)
		}
	}
	read("1")
	update := cm.DeepCopy()
	update.Data["k"], update.ResourceVersion = "2", "2"
	if _, err := client.CoreV1().ConfigMaps("ns").Update(ctx, update, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	read("1") // within the minute
	if n := gets(client, "configmaps"); n != 1 {
		t.Fatalf("GETs within the TTL: %d, want 1", n)
	}
	clk.Step(61 * time.Second)
	read("2")
	// The Node says 0 s (the TTL controller's value for small clusters):
	// every read goes to the API server.
	o.SetNodeAnnotations(func() (map[string]string, bool) { return map[string]string{"node.alpha.kubernetes.io/ttl": "0"}, true })
	before := gets(client, "configmaps")
	read("2")
	read("2")
	if n := gets(client, "configmaps"); n != before+2 {
		t.Errorf("GETs with a 0 s TTL: %d, want %d", n, before+2)
	}
	o.SetNodeAnnotations(nil)
	// A second pod referencing it forgets the read.
	clk.Step(61 * time.Second)
	read("2")
	before = gets(client, "configmaps")
	o.RegisterPod(podWith("u2", "ns", []string{"a"}, nil))
	read("2")
	if n := gets(client, "configmaps"); n != before+1 {
		t.Errorf("GETs after a new pod's registration: %d, want %d", n, before+1)
	}
	// Missing: NotFound kept for the TTL, with upstream's words.
	for range 2 {
		if _, err := o.GetConfigMap(ctx, "ns", "missing"); !apierrors.IsNotFound(err) || err.Error() != `configmap "missing" not found` {
			t.Fatalf("missing: %v", err)
		}
	}
	// Other errors are not kept.
	client.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("boom")
	})
	o.RegisterPod(podWith("u3", "ns", nil, []string{"s"}))
	for range 2 {
		if _, err := o.GetSecret(ctx, "ns", "s"); err == nil || apierrors.IsNotFound(err) {
			t.Fatalf("GetSecret with a failing API: %v", err)
		}
	}
	if n := gets(client, "secrets"); n != 2 {
		t.Errorf("secret GETs = %d, want 2 (errors are not kept)", n)
	}
	// The last pod gone, the object is no more kept: reads go straight to
	// the API server.
	for _, uid := range []string{"u1", "u2"} {
		o.UnregisterPod(podWith(uid, "ns", []string{"a"}, nil))
	}
	before = gets(client, "configmaps")
	read("2")
	read("2")
	if n := gets(client, "configmaps"); n != before+2 {
		t.Errorf("GETs of an object no pod references: %d, want %d", n, before+2)
	}
}

// The Get strategy reads every time.
func TestGetStrategy(t *testing.T) {
	t.Parallel()
	o, client, _ := newStrategyObjects(t, StrategyGet, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}})
	o.RegisterPod(podWith("u1", "ns", nil, []string{"s"}))
	for range 3 {
		if _, err := o.GetSecret(context.Background(), "ns", "s"); err != nil {
			t.Fatal(err)
		}
	}
	if n := gets(client, "secrets"); n != 3 {
		t.Errorf("GETs = %d, want 3", n)
	}
}

// The Watch strategy: a registered object is read from its own watch (no
// GET), changes arrive through it, an immutable object's watch stops, an
// idle watch stops and starts again at the next read, and the last pod
// gone the object is read from the API server.
func TestWatchStrategy(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}, Data: map[string]string{"k": "1"}}
	frozen := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "frozen"}, Immutable: ptr.To(true)}
	o, client, clk := newStrategyObjects(t, StrategyWatch, cm, frozen)
	if err := o.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); o.Wait() }()
	pod := podWith("u1", "ns", []string{"a", "missing"}, []string{"frozen"})
	o.RegisterPod(pod)
	got, err := o.GetConfigMap(ctx, "ns", "a")
	if err != nil || got.Data["k"] != "1" {
		t.Fatalf("GetConfigMap = %v, %v", got, err)
	}
	if _, err := o.GetConfigMap(ctx, "ns", "missing"); !apierrors.IsNotFound(err) || err.Error() != `configmap "missing" not found` {
		t.Fatalf("missing: %v", err)
	}
	update := cm.DeepCopy()
	update.Data["k"] = "2"
	if _, err := client.CoreV1().ConfigMaps("ns").Update(ctx, update, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { got, err := o.GetConfigMap(ctx, "ns", "a"); return err == nil && got.Data["k"] == "2" })
	if n := gets(client, "configmaps"); n != 0 {
		t.Errorf("GETs of watched configMaps: %d, want 0", n)
	}
	// Immutable: read once, then no more watched.
	if _, err := o.GetSecret(ctx, "ns", "frozen"); err != nil {
		t.Fatal(err)
	}
	secrets := o.watches[1]
	if running(secrets, "ns", "frozen") {
		t.Error("the immutable secret is still watched")
	}
	if _, err := o.GetSecret(ctx, "ns", "frozen"); err != nil {
		t.Errorf("immutable secret read from its last copy: %v", err)
	}
	// Idle: not read for 5 minutes (5 x the default sync frequency), the
	// watch stops; the next read starts it again.
	cms := o.watches[0]
	clk.Step(6 * time.Minute)
	cms.recycleIdle()
	if running(cms, "ns", "a") {
		t.Fatal("idle watch still running")
	}
	got, err = o.GetConfigMap(ctx, "ns", "a")
	if err != nil || got.Data["k"] != "2" || !running(cms, "ns", "a") {
		t.Fatalf("read after the idle stop: %v, %v, running %v", got, err, running(cms, "ns", "a"))
	}
	// Unregistered: the watch goes, reads go to the API server.
	o.UnregisterPod(pod)
	if n := len(cms.items); n != 0 {
		t.Errorf("%d configMap watches left after the last pod", n)
	}
	got, err = o.GetConfigMap(ctx, "ns", "a")
	if err != nil || got.Data["k"] != "2" {
		t.Fatalf("read of an unregistered configMap: %v, %v", got, err)
	}
	if n := gets(client, "configmaps"); n != 1 {
		t.Errorf("GETs after the last pod: %d, want 1", n)
	}
}

func running(s *watchStore, namespace, name string) bool {
	s.mu.Lock()
	item := s.items[objectKey{namespace, name}]
	s.mu.Unlock()
	if item == nil {
		return false
	}
	item.mu.Lock()
	defer item.mu.Unlock()
	return item.running
}

// podSecretNames and podConfigMapNames list what upstream's visitors list.
func TestPodReferences(t *testing.T) {
	t.Parallel()
	pod := &v1.Pod{Spec: v1.PodSpec{
		ImagePullSecrets: []v1.LocalObjectReference{{Name: "pull"}, {Name: ""}},
		InitContainers: []v1.Container{{Env: []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{
			SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "init-env"}}}}}}},
		Containers: []v1.Container{{EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm-from"}}}},
			Env: []v1.EnvVar{{Name: "B", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cm-env"}}}}}}},
		EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{
			EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "debug"}}}}}}},
		Volumes: []v1.Volume{
			{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "vol-secret"}}},
			{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "vol-cm"}}}},
			{Name: "p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "proj-secret"}}},
				{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"}}}}}}},
			{Name: "csi", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: &v1.LocalObjectReference{Name: "csi-secret"}}}},
		},
	}}
	if got, want := sets.List(podSecretNames(pod)), []string{"csi-secret", "debug", "init-env", "proj-secret", "pull", "vol-secret"}; !slices.Equal(got, want) {
		t.Errorf("secrets %v, want %v", got, want)
	}
	if got, want := sets.List(podConfigMapNames(pod)), []string{"cm-env", "cm-from", "kube-root-ca.crt", "vol-cm"}; !slices.Equal(got, want) {
		t.Errorf("configMaps %v, want %v", got, want)
	}
}

func TestCreateToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o, client, _ := newTestObjects(t)
	client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(k8stesting.CreateAction)
		if !ok || a.GetSubresource() != "token" || a.GetNamespace() != "ns" {
			return true, nil, errors.New("unexpected action")
		}
		tr := ca.GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		tr.Status = authenticationv1.TokenRequestStatus{Token: "tok-" + tr.Spec.Audiences[0]}
		return true, tr, nil
	})
	tr, err := o.CreateToken(ctx, "ns", "sa", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"api"}}})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Status.Token != "tok-api" {
		t.Errorf("token = %q", tr.Status.Token)
	}
	if _, err := o.CreateToken(ctx, "ns", "sa", nil); err == nil {
		t.Error("nil request accepted")
	}
}

func TestServicesInformer(t *testing.T) {
	t.Parallel()
	svc := func(ns, name string) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{ClusterIP: "10.0.0.1"}}
	}
	o, client, _ := newTestObjects(t, svc("default", "kubernetes"), svc("prod", "web"), svc("prod", "db"))
	if o.HasSynced() {
		t.Fatal("synced before Run")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { o.run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor(t, o.HasSynced)

	list, err := o.ListServices("prod")
	if err != nil || len(list) != 2 {
		t.Fatalf("ListServices(prod) = %d services, %v", len(list), err)
	}
	if _, err := client.CoreV1().Services("prod").Create(ctx, svc("prod", "cache"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { list, _ := o.ListServices("prod"); return len(list) == 3 })
	if list, _ := o.ListServices("empty"); len(list) != 0 {
		t.Errorf("ListServices(empty) = %d services", len(list))
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
