//go:build linux

package runtimeclass

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
)

func TestIntegrationLookupRuntimeHandler(t *testing.T) {
	c := shared.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := "rc-" + rand.String(6)
	rc, err := c.Client.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: "crun"}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.NodeV1().RuntimeClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	m, err := New(Options{Client: c.NodeClient(t, "rc-node"), Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.LookupRuntimeHandler(ctx, &name); err == nil {
		t.Error("a lookup before Start succeeded")
	}
	runCtx, stop := context.WithCancel(ctx)
	if err := m.Start(runCtx); err != nil {
		t.Fatal(err)
	}
	defer func() { stop(); m.Wait() }()

	for _, none := range []*string{nil, ptr.To("")} {
		if h, err := m.LookupRuntimeHandler(ctx, none); h != "" || err != nil {
			t.Errorf("no class: %q, %v; want the default handler", h, err)
		}
	}
	if h, err := m.LookupRuntimeHandler(ctx, &name); h != "crun" || err != nil {
		t.Fatalf("LookupRuntimeHandler(%s) = %q, %v; want crun", name, h, err)
	}
	_, err = m.LookupRuntimeHandler(ctx, ptr.To("missing-"+name))
	if want := `runtimeclass.node.k8s.io "missing-` + name + `" not found`; !apierrors.IsNotFound(err) || err.Error() != want {
		t.Errorf("missing class: %v, want NotFound %q", err, want)
	}

	// The handler is immutable: a class deleted and made again with another
	// handler is seen once the watch delivers both.
	if err := c.Client.NodeV1().RuntimeClasses().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the deleted class NotFound", func() bool {
		_, err := m.LookupRuntimeHandler(ctx, &name)
		return apierrors.IsNotFound(err)
	})
	rc.ResourceVersion, rc.UID, rc.Handler = "", "", "runc"
	if _, err := c.Client.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the new handler", func() bool {
		h, _ := m.LookupRuntimeHandler(ctx, &name)
		return h == "runc"
	})
}

// eventually polls cond every 50ms until it holds, failing at ctx's end.
func eventually(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
