package dockershim

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/waitfor"
)

// indexLister counts lists and can hold one until released.
type indexLister struct {
	mu      sync.Mutex
	calls   int
	started chan struct{} // when set, signalled when a list starts
	release chan struct{} // when set, a list waits for it
	err     error
}

func (l *indexLister) list(ctx context.Context) ([]statsTarget, error) {
	l.mu.Lock()
	l.calls++
	n, started, release, err := l.calls, l.started, l.release, l.err
	l.mu.Unlock()
	if started != nil {
		started <- struct{}{}
	}
	if release != nil {
		<-release
	}
	return []statsTarget{{id: "c", running: n > 0}}, err
}

func (l *indexLister) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}

// TestStatsIndexReuse: a list is reused only while the event stream is followed, no
// event came since it started and it is younger than statsListTTL.
func TestStatsIndexReuse(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	ctx := context.Background()
	for _, tc := range []struct {
		desc   string
		live   bool
		before func(x *statsIndex) // between the first and the second get
		want   int                 // lists after two gets
	}{
		{"events followed: reused", true, func(*statsIndex) {}, 1},
		{"no event stream: listed each time", false, func(*statsIndex) {}, 2},
		{"an event came: listed again", true, (*statsIndex).invalidate, 2},
		{"stream broke and came back: listed again", true, func(x *statsIndex) { x.setLive(false); x.setLive(true) }, 2},
		{"older than the TTL: listed again", true, func(*statsIndex) { now = now.Add(statsListTTL) }, 2},
		{"clock went back: listed again", true, func(*statsIndex) { now = now.Add(-time.Second) }, 2},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			now = time.Unix(1000, 0)
			var x statsIndex
			x.setLive(tc.live)
			l := &indexLister{}
			if _, err := x.get(ctx, clock, l.list); err != nil {
				t.Fatal(err)
			}
			tc.before(&x)
			got, err := x.get(ctx, clock, l.list)
			if err != nil || len(got) != 1 {
				t.Fatalf("get = %v, %v", got, err)
			}
			if l.count() != tc.want {
				t.Errorf("%d lists, want %d", l.count(), tc.want)
			}
		})
	}
}

// TestStatsIndexEventDuringList: an event that comes while a list runs makes the
// next request list again (the list may predate it); a failed list is not stored.
func TestStatsIndexEventDuringList(t *testing.T) {
	t.Parallel()
	clock := func() time.Time { return time.Unix(1000, 0) }
	ctx := context.Background()
	var x statsIndex
	x.setLive(true)
	l := &indexLister{started: make(chan struct{}, 1), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() { _, err := x.get(ctx, clock, l.list); done <- err }()
	<-l.started
	x.invalidate() // a die event while Docker answers
	close(l.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.started = nil
	l.mu.Unlock()
	if _, err := x.get(ctx, clock, l.list); err != nil || l.count() != 2 {
		t.Fatalf("after an event during the list: %d lists (err %v), want 2", l.count(), err)
	}
	if _, err := x.get(ctx, clock, l.list); err != nil || l.count() != 2 {
		t.Fatalf("quiet: %d lists (err %v), want 2", l.count(), err)
	}

	x.invalidate()
	l.mu.Lock()
	l.err = errors.New("docker is down")
	l.mu.Unlock()
	if _, err := x.get(ctx, clock, l.list); err == nil {
		t.Fatal("a failed list was not reported")
	}
	if _, err := x.get(ctx, clock, l.list); err == nil || l.count() != 4 {
		t.Fatalf("after a failed list: %d lists (err %v), want 4: a failure is not stored", l.count(), err)
	}
}

// TestStatsIndexSingleFlight: concurrent requests share one list.
func TestStatsIndexSingleFlight(t *testing.T) {
	t.Parallel()
	// get reads the clock under the index's lock right before it looks for a list
	// in flight (the first request reads it once more to stamp its list): the count
	// of reads tells when every request has found the list in flight.
	var reads atomic.Int64
	clock := func() time.Time { reads.Add(1); return time.Unix(1000, 0) }
	var x statsIndex
	l := &indexLister{started: make(chan struct{}, 16), release: make(chan struct{})}
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	wg.Go(func() { _, err := x.get(context.Background(), clock, l.list); errs <- err })
	<-l.started
	for range n - 1 {
		wg.Go(func() { _, err := x.get(context.Background(), clock, l.list); errs <- err })
	}
	// Let the others find the list in flight, then let it finish.
	waitfor.Condition(t, func() bool { return reads.Load() >= 2+(n-1) })
	close(l.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if l.count() != 1 {
		t.Errorf("%d lists for %d overlapping requests, want 1", l.count(), n)
	}
}
