//go:build linux

package apiobjects

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIntegrationObjects(t *testing.T) {
	c := shared.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := c.CreateNamespace(ctx, t, "apiobjects-")
	o, err := New(Options{Client: c.Client, Logger: zaptest.NewLogger(t)}) // the Watch strategy
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	if err := o.Start(runCtx); err != nil {
		t.Fatal(err)
	}
	defer func() { stop(); o.Wait() }()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", UID: "u1"}, Spec: v1.PodSpec{
		Containers: []v1.Container{{Name: "c", EnvFrom: []v1.EnvFromSource{
			{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}},
			{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "s"}}},
			{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "missing"}}},
		}}}}}
	o.RegisterPod(pod)
	defer o.UnregisterPod(pod)

	t.Run("configmap read back and its change seen through the watch", func(t *testing.T) {
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"k": "1"}}
		cm, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		poll(ctx, t, "the created configMap seen", func() bool {
			got, err := o.GetConfigMap(ctx, ns, "cfg")
			return err == nil && got.Data["k"] == "1"
		})
		cm.Data["k"] = "2"
		if _, err := c.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		updated := time.Now()
		poll(ctx, t, "the update seen", func() bool {
			got, err := o.GetConfigMap(ctx, ns, "cfg")
			return err == nil && got.Data["k"] == "2"
		})
		t.Logf("update seen after %s", time.Since(updated).Round(time.Millisecond))
	})

	t.Run("secret read back, missing one is NotFound", func(t *testing.T) {
		s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"password": "hunter2"}}
		if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(ctx, t, "the secret seen", func() bool {
			got, err := o.GetSecret(ctx, ns, "s")
			return err == nil && string(got.Data["password"]) == "hunter2"
		})
		var missing error // NotFound once its watch has synced (the first read waits 1 s for it)
		poll(ctx, t, "the missing secret's watch synced", func() bool {
			_, missing = o.GetSecret(ctx, ns, "missing")
			return apierrors.IsNotFound(missing)
		})
		if missing.Error() != `secret "missing" not found` {
			t.Fatalf("missing secret: %v", missing)
		}
		// One no pod references: read from the API server.
		if _, err := o.GetConfigMap(ctx, ns, "missing"); !apierrors.IsNotFound(err) || err.Error() != `configmap "missing" not found` {
			t.Fatalf("missing configmap: %v", err)
		}
	})

	t.Run("services through the informer", func(t *testing.T) {
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec:       v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "http", Port: 80}}},
		}
		if _, err := c.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(ctx, t, "the informer synced and saw web and kubernetes", func() bool {
			mine, _ := o.ListServices(ns)
			def, _ := o.ListServices(metav1.NamespaceDefault)
			return o.HasSynced() && hasService(mine, "web") && hasService(def, "kubernetes")
		})
		mine, _ := o.ListServices(ns)
		if len(mine) != 1 || mine[0].Spec.ClusterIP == "" {
			t.Errorf("services of %s = %v", ns, mine)
		}
	})

	t.Run("token request for the default service account", func(t *testing.T) {
		poll(ctx, t, "the default service account exists", func() bool {
			_, err := c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil
		})
		exp := int64(600)
		tr, err := o.CreateToken(ctx, ns, "default", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp},
		})
		if err != nil {
			t.Fatal(err)
		}
		if tr.Status.Token == "" || tr.Status.ExpirationTimestamp.Before(&metav1.Time{Time: time.Now()}) {
			t.Errorf("token request status = %+v", tr.Status)
		}
		if _, err := o.CreateToken(ctx, ns, "nobody", &authenticationv1.TokenRequest{}); !apierrors.IsNotFound(err) {
			t.Errorf("token for a missing service account: %v, want NotFound", err)
		}
	})
}

func hasService(list []*v1.Service, name string) bool {
	for _, s := range list {
		if s.Name == name {
			return true
		}
	}
	return false
}

func poll(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}
