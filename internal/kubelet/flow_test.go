package kubelet

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// TestLifecycleWithRealPodWorkers drives pods through the real pod workers: a
// pod from the source is synced, a pod dropped by the source is killed and its
// volumes torn down, a runtime pod without config is killed, and the kubelet
// stops without killing the pod that is still desired.
func TestLifecycleWithRealPodWorkers(t *testing.T) {
	t.Parallel()
	cache := kubecontainer.NewCache()
	e := newEnv(t, func(o *Options) {
		o.Parts.NewPodWorkers = nil
		o.Parts.Cache = cache
		o.Config.HousekeepingInterval = 20 * time.Millisecond
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // stands in for the PLEG's relist timestamps
		for ctx.Err() == nil {
			cache.UpdateTime(time.Now())
			time.Sleep(10 * time.Millisecond)
		}
	}()
	done := make(chan error, 1)
	if err := e.state.Start(ctx); err != nil {
		t.Fatal(err)
	}
	go func() { done <- e.k.Run(ctx) }()

	keep := staticPod("keep", "uid-keep")
	drop := staticPod("drop", "uid-drop", func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr(int64(5)) })
	e.source.ch <- kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{keep, drop}}
	waitUntil(t, "both pods synced", func() bool {
		var synced []k8stypes.UID
		for _, s := range e.runtime.syncs() {
			synced = append(synced, s.pod.UID)
		}
		return slices.Contains(synced, "uid-keep") && slices.Contains(synced, "uid-drop")
	})

	e.source.ch <- kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{keep}}
	waitUntil(t, "dropped pod killed and its volumes unmounted", func() bool {
		e.volumes.mu.Lock()
		defer e.volumes.mu.Unlock()
		return slices.Contains(e.volumes.unmounted, "uid-drop")
	})
	if kills := e.runtime.kills(); len(kills) != 1 || kills[0].pod.UID != "uid-drop" || *kills[0].grace != 5 {
		t.Errorf("kills = %+v", kills)
	}
	waitUntil(t, "dropped pod directory no longer protected", func() bool {
		e.volumes.mu.Lock()
		defer e.volumes.mu.Unlock()
		if len(e.volumes.cleanups) == 0 {
			return false
		}
		last := e.volumes.cleanups[len(e.volumes.cleanups)-1]
		return !last["uid-drop"] && last["uid-keep"]
	})

	e.runtime.mu.Lock()
	e.runtime.pods = []*kubecontainer.Pod{{ID: "uid-orphan", Name: "orphan", Namespace: "default"}}
	e.runtime.mu.Unlock()
	waitUntil(t, "orphan killed", func() bool {
		for _, k := range e.runtime.kills() {
			if k.pod.UID == "uid-orphan" && *k.grace == 1 {
				return true
			}
		}
		return false
	})
	e.runtime.mu.Lock()
	e.runtime.pods = nil
	e.runtime.mu.Unlock()

	if st, ok := e.k.status.GetPodStatus("uid-keep"); !ok || st.Phase != v1.PodPending {
		t.Errorf("kept pod status = %+v", st)
	}
	kills := len(e.runtime.kills())
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
	if got := len(e.runtime.kills()); got != kills {
		t.Errorf("%d pods killed on exit", got-kills)
	}
}
