package kuberuntime

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// twoSidecarPod: sidecars s0 and s1 (s1 declared after s0) and the regular
// container c.
func twoSidecarPod() *v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	pod := testPod("c")
	s0, s1 := testContainer("s0"), testContainer("s1")
	s0.RestartPolicy, s1.RestartPolicy = &always, &always
	pod.Spec.InitContainers = []v1.Container{s0, s1}
	return pod
}

func TestKillPodStopsSidecarsInReverseOrder(t *testing.T) {
	t.Parallel()
	pod := twoSidecarPod()
	e := runningEnv(t, pod)
	if len(e.containersNamed("s0")) != 1 || len(e.containersNamed("s1")) != 1 || len(e.containersNamed("c")) != 1 {
		t.Fatalf("setup: calls %v", e.runtime.GetCalls())
	}
	if err := e.m.KillPod(context.Background(), pod, nil, nil); err != nil {
		t.Fatalf("KillPod: %v", err)
	}
	stops := e.runtime.stopCalls()
	var got []string
	for _, s := range stops {
		for _, n := range []string{"_c_", "_s0_", "_s1_"} {
			if strings.Contains(s.id, n) {
				got = append(got, strings.Trim(n, "_"))
			}
		}
	}
	if strings.Join(got, ",") != "c,s1,s0" {
		t.Errorf("stop order = %v, want c, s1, s0 (regular first, then sidecars in reverse)", got)
	}
}

func TestStopOrder(t *testing.T) {
	t.Parallel()
	pod := twoSidecarPod()
	if newStopOrder(testPod("c"), []string{"c"}) != nil {
		t.Error("a pod without sidecars got a stop order")
	}
	o := newStopOrder(pod, []string{"c", "s0", "s1"})
	if w := o.wait("c", time.Minute); w > time.Second {
		t.Errorf("the regular container waited %v", w)
	}
	// s0 waits for c and s1: with neither stopped it waits out its budget.
	if w := o.wait("s0", 50*time.Millisecond); w < 50*time.Millisecond {
		t.Errorf("s0 waited %v with c and s1 running, want its whole budget", w)
	}
	if w := o.wait("s0", 0); w != 0 {
		t.Errorf("no budget: waited %v", w)
	}
	released := make(chan time.Duration, 1)
	go func() { released <- o.wait("s0", time.Minute) }()
	o.done("c")
	select {
	case <-released:
		t.Fatal("s0 released while s1 still runs")
	case <-time.After(50 * time.Millisecond):
	}
	o.done("s1")
	o.done("s1") // twice is harmless
	select {
	case <-released:
	case <-time.After(5 * time.Second):
		t.Fatal("s0 not released once c and s1 stopped")
	}
	// A container that was not running does not hold anyone back.
	o = newStopOrder(pod, []string{"s0"})
	if w := o.wait("s0", time.Minute); w > time.Second {
		t.Errorf("s0 waited %v for containers that were not running", w)
	}
	var none *stopOrder
	none.done("c")
	if none.wait("c", time.Minute) != 0 {
		t.Error("a nil order waits")
	}
}
