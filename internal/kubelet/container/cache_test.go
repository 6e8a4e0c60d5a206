package container

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/waitfor"
)

func TestCacheGet(t *testing.T) {
	t.Parallel()
	c := NewCache()
	st, err := c.Get("a")
	if err != nil || st == nil || st.ID != "a" || len(st.ContainerStatuses) != 0 {
		t.Errorf("Get of an unknown pod = %+v, %v; want empty status with ID a", st, err)
	}
	errBoom := errors.New("boom")
	c.Set("a", &PodStatus{ID: "a", Name: "x"}, errBoom, t0)
	st, err = c.Get("a")
	if st.Name != "x" || !errors.Is(err, errBoom) {
		t.Errorf("Get = %+v, %v; want the stored status and error", st, err)
	}
	c.Set("a", &PodStatus{ID: "a", Name: "older"}, nil, t0.Add(-time.Second))
	if st, _ := c.Get("a"); st.Name != "x" {
		t.Errorf("an older Set replaced the status: %+v", st)
	}
	c.Delete("a")
	if st, _ := c.Get("a"); st.Name != "" {
		t.Errorf("Get after Delete = %+v, want empty", st)
	}
}

func TestCacheGetNewerThan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		// prepare runs before the call; wake runs while it waits (nil: answered at once).
		prepare  func(c *Cache)
		wake     func(c *Cache)
		wantName string
	}{
		{
			desc:     "entry already newer",
			prepare:  func(c *Cache) { c.Set("a", &PodStatus{Name: "fresh"}, nil, t0.Add(time.Second)) },
			wantName: "fresh",
		},
		{
			desc: "global timestamp already newer",
			prepare: func(c *Cache) {
				c.Set("a", &PodStatus{Name: "old"}, nil, t0.Add(-time.Second))
				c.UpdateTime(t0.Add(time.Second))
			},
			wantName: "old",
		},
		{
			desc:     "unknown pod, global timestamp newer: empty status",
			prepare:  func(c *Cache) { c.UpdateTime(t0.Add(time.Second)) },
			wantName: "",
		},
		{
			desc:     "woken by a newer Set",
			prepare:  func(c *Cache) { c.Set("a", &PodStatus{Name: "old"}, nil, t0) },
			wake:     func(c *Cache) { c.Set("a", &PodStatus{Name: "new"}, nil, t0.Add(time.Second)) },
			wantName: "new",
		},
		{
			desc:     "woken by UpdateTime",
			prepare:  func(c *Cache) { c.Set("a", &PodStatus{Name: "old"}, nil, t0) },
			wake:     func(c *Cache) { c.UpdateTime(t0.Add(time.Second)) },
			wantName: "same-time", // the last write, made while waiting
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			c := NewCache()
			tc.prepare(c)
			type result struct {
				st  *PodStatus
				err error
			}
			res := make(chan result, 1)
			go func() {
				st, err := c.GetNewerThan(context.Background(), "a", t0)
				res <- result{st, err}
			}()
			if tc.wake != nil {
				waitFor(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.subscribers["a"]) == 1 })
				// Writes that are not newer do not answer.
				c.Set("a", &PodStatus{Name: "same-time"}, nil, t0)
				c.UpdateTime(t0)
				select {
				case r := <-res:
					t.Fatalf("answered by a write that is not newer: %+v", r.st)
				case <-time.After(20 * time.Millisecond):
				}
				tc.wake(c)
			}
			select {
			case r := <-res:
				if r.err != nil || r.st.Name != tc.wantName {
					t.Errorf("GetNewerThan = %+v, %v; want name %q", r.st, r.err, tc.wantName)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("GetNewerThan did not return")
			}
		})
	}
}

// TestCacheMarkChanged: after the kubelet changed a pod, the global time no
// longer answers for it (its own event may still be on its way); a read made
// at or after the change does, and from then on the global time again.
func TestCacheMarkChanged(t *testing.T) {
	t.Parallel()
	c := NewCache()
	c.Set("a", &PodStatus{Name: "before"}, nil, t0.Add(-2*time.Second))
	c.MarkChanged("a", t0.Add(-time.Second))
	res := make(chan *PodStatus, 1)
	go func() {
		st, err := c.GetNewerThan(context.Background(), "a", t0)
		if err != nil {
			t.Error(err)
		}
		res <- st
	}()
	waitFor(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.subscribers["a"]) == 1 })
	c.UpdateTime(t0.Add(time.Second))
	// A read that began before the change does not clear it either.
	c.Set("a", &PodStatus{Name: "read before the change"}, nil, t0.Add(-1500*time.Millisecond))
	c.UpdateTime(t0.Add(2 * time.Second))
	select {
	case st := <-res:
		t.Fatalf("answered by the global time before the changed pod was read: %+v", st)
	case <-time.After(20 * time.Millisecond):
	}
	// The read after the change is older than the waiter's minimum; with it
	// cached, the global time (already past the minimum) answers.
	c.Set("a", &PodStatus{Name: "after"}, nil, t0.Add(-time.Second))
	select {
	case st := <-res:
		if st.Name != "after" {
			t.Errorf("GetNewerThan = %+v, want the read after the change", st)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("GetNewerThan did not return once the changed pod was read")
	}
	// Other pods are not held back.
	if st, err := c.GetNewerThan(context.Background(), "b", t0); err != nil || st.ID != "b" {
		t.Errorf("GetNewerThan of an unchanged pod = %+v, %v", st, err)
	}
}

func TestCacheGetNewerThanCancelled(t *testing.T) {
	t.Parallel()
	c := NewCache()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.GetNewerThan(ctx, "a", t0)
		done <- err
	}()
	waitFor(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.subscribers["a"]) == 1 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("GetNewerThan ignored the cancelled context")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.subscribers); n != 0 {
		t.Errorf("%d subscriber lists left after cancel, want 0", n)
	}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

var waitFor = waitfor.Condition
