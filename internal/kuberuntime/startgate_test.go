package kuberuntime

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

func seenPod(uid string, seen time.Time) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: k8stypes.UID(uid),
		Annotations: map[string]string{kubecontainer.ConfigFirstSeenAnnotationKey: seen.Format(time.RFC3339Nano)}}}
}

// TestStartGateOldestFirst: with the slots taken, freed slots go to the
// pods seen first, whatever the order they asked in; a waiter whose context
// ends leaves the line; a nil gate admits everything.
func TestStartGateOldestFirst(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := newStartGate(1)
	hold, err := g.acquire(context.Background(), seenPod("first", base))
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 3)
	start := func(uid string, seen time.Time) {
		go func() {
			release, err := g.acquire(context.Background(), seenPod(uid, seen))
			if err != nil {
				t.Error(err)
				return
			}
			order <- uid
			release()
		}()
	}
	// They ask newest first.
	start("c", base.Add(3*time.Second))
	waitWaiters(t, g, 1)
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { _, err := g.acquire(ctx, seenPod("z", base.Add(time.Second))); gaveUp <- err }()
	waitWaiters(t, g, 2)
	start("b", base.Add(2*time.Second))
	start("a", base.Add(time.Second))
	waitWaiters(t, g, 4)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled wait = %v, want context.Canceled", err)
	}
	hold()
	for _, want := range []string{"a", "b", "c"} {
		if got := <-order; got != want {
			t.Fatalf("slot went to %s, want %s (oldest first)", got, want)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		g.mu.Lock()
		free, waiting := g.free, len(g.waiters)
		g.mu.Unlock()
		if free == 1 && waiting == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after all released: free %d, waiters %d; want 1 and 0", free, waiting)
		}
		time.Sleep(time.Millisecond)
	}
	var none *startGate
	release, err := none.acquire(context.Background(), seenPod("x", base))
	if err != nil {
		t.Fatal(err)
	}
	release()
}

func waitWaiters(t *testing.T, g *startGate, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		g.mu.Lock()
		got := len(g.waiters)
		g.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}
