package apiobjects

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

func newTestObjects(t *testing.T, objs ...runtime.Object) (*Objects, *fake.Clientset, *clocktesting.FakePassiveClock) {
	t.Helper()
	client := fake.NewClientset(objs...)
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_700_000_000, 0))
	o, err := New(Options{Client: client, CacheTTL: 5 * time.Second, Clock: clk, Logger: zaptest.NewLogger(t)})
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

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		opts Options
	}{
		{desc: "no client", opts: Options{}},
		{desc: "negative ttl", opts: Options{Client: fake.NewClientset(), CacheTTL: -time.Second}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if _, err := New(tc.opts); err == nil {
				t.Fatal("New succeeded")
			}
		})
	}
}

func TestGetConfigMapCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"k": "1"}}
	o, client, clk := newTestObjects(t, cm)

	got, err := o.GetConfigMap(ctx, "ns", "cfg")
	if err != nil || got.Data["k"] != "1" {
		t.Fatalf("GetConfigMap = %v, %v", got, err)
	}
	got.Data["k"] = "mutated" // the caller's own copy
	clk.SetTime(clk.Now().Add(4 * time.Second))
	if got, _ = o.GetConfigMap(ctx, "ns", "cfg"); got.Data["k"] != "1" {
		t.Errorf("cached value = %q, want 1", got.Data["k"])
	}
	if n := gets(client, "configmaps"); n != 1 {
		t.Fatalf("GETs within the TTL = %d, want 1", n)
	}

	cm.Data["k"] = "2"
	if _, err := client.CoreV1().ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(clk.Now().Add(time.Second)) // 5s after the read: expired
	if got, _ = o.GetConfigMap(ctx, "ns", "cfg"); got.Data["k"] != "2" {
		t.Errorf("after the TTL = %q, want 2", got.Data["k"])
	}
	if n := gets(client, "configmaps"); n != 2 {
		t.Errorf("GETs = %d, want 2", n)
	}
}

func TestNotFoundIsCachedForTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o, client, clk := newTestObjects(t)
	for _, tc := range []struct {
		desc     string
		get      func() error
		resource string
		message  string
	}{
		{
			desc:     "configmap",
			get:      func() error { _, err := o.GetConfigMap(ctx, "ns", "x"); return err },
			resource: "configmaps", message: `configmap "x" not found`,
		},
		{
			desc:     "secret",
			get:      func() error { _, err := o.GetSecret(ctx, "ns", "x"); return err },
			resource: "secrets", message: `secret "x" not found`,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			for range 2 {
				err := tc.get()
				if !apierrors.IsNotFound(err) || err.Error() != tc.message {
					t.Fatalf("error = %v, want NotFound %q", err, tc.message)
				}
			}
			if n := gets(client, tc.resource); n != 1 {
				t.Errorf("GETs = %d, want 1 (absence cached)", n)
			}
		})
	}
	// Both appear; after the TTL they are read again.
	if _, err := client.CoreV1().Secrets("ns").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.GetSecret(ctx, "ns", "x"); !apierrors.IsNotFound(err) {
		t.Fatalf("within the TTL: %v, want the cached NotFound", err)
	}
	clk.SetTime(clk.Now().Add(5 * time.Second))
	if _, err := o.GetSecret(ctx, "ns", "x"); err != nil {
		t.Fatalf("after the TTL: %v", err)
	}
}

func TestOtherErrorsAreNotCached(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o, client, _ := newTestObjects(t, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Data: map[string][]byte{"k": []byte("v")}})
	fail := true
	client.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fail {
			return true, nil, apierrors.NewForbidden(v1.Resource("secrets"), "s", errors.New("no relationship"))
		}
		return false, nil, nil
	})
	_, err := o.GetSecret(ctx, "ns", "s")
	if !apierrors.IsForbidden(err) {
		t.Fatalf("error = %v, want Forbidden (wrapped)", err)
	}
	fail = false
	s, err := o.GetSecret(ctx, "ns", "s")
	if err != nil || string(s.Data["k"]) != "v" {
		t.Fatalf("retry = %v, %v", s, err)
	}
}

func TestCacheSweepsExpiredEntries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o, _, clk := newTestObjects(t)
	for _, name := range []string{"a", "b", "c"} {
		_, _ = o.GetConfigMap(ctx, "ns", name)
	}
	if n := o.configMaps.len(); n != 3 {
		t.Fatalf("entries = %d, want 3", n)
	}
	clk.SetTime(clk.Now().Add(6 * time.Second))
	_, _ = o.GetConfigMap(ctx, "ns", "a")
	if n := o.configMaps.len(); n != 1 {
		t.Errorf("entries after the sweep = %d, want 1", n)
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
