//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/network"
)

// burstFloor is the floor run of BenchmarkBurst: what a naive client of
// Docker's API pays for the same pods, without a kubelet. Each pair is a pause
// container (network none, shareable IPC, as the shim's sandbox), the CNI ADD
// of its netns through the project's CNI wrapper on a node fixture's conflist,
// plugin dir and libcni cache (the kubelet run's node gets the same conflist
// on its own bridge and subnet), then busybox `sleep 3600` joined to the
// pause container's network and IPC namespaces. The pairs are launched at once,
// one goroutine each.
type burstFloor struct {
	n   *node
	dc  *libdocker.Client
	net *network.Manager
}

// floorPair is one pause+busybox pair and how far its start went.
type floorPair struct {
	name           string
	pauseID, appID string
	netns          string // /proc/<pause pid>/ns/net once the pause container runs
	networked      bool   // the CNI ADD was attempted: clean-up runs the DEL
	started        time.Time
	err            error
}

// runBurstFloor is the floor run of a round: cfg.pods pairs launched at once,
// latency = the busybox container's StartedAt minus the launch time. Every
// pair is torn down (CNI DEL, forced removal by ID) and the node fixture
// cleaned up before it returns.
func runBurstFloor(b *testing.B, dc *libdocker.Client, cfg burstConfig, round *burstRound) {
	b.Helper()
	n := newNode(b) // its CNI conf, bridge, subnet and cache dirs; no kubelet
	defer n.cleanup()
	nm, err := network.New(network.Options{ConfDir: n.cniConf, BinDirs: []string{cniBinDir}, CacheDir: n.cniCache})
	if err != nil {
		b.Fatal(err)
	}
	f := &burstFloor{n: n, dc: dc, net: nm}
	pairs := make([]floorPair, cfg.pods)
	for i := range pairs {
		pairs[i].name = fmt.Sprintf("e2e-burst-floor-%s-%03d", n.id, i)
	}
	defer func() { round.floorCleanup = f.cleanup(pairs) }()

	ctx, cancel := context.WithTimeout(context.Background(), cfg.startTimeout())
	defer cancel()
	var wg sync.WaitGroup
	docker0 := dockerCPUTicks(b)
	launched := time.Now()
	for i := range pairs {
		wg.Add(1)
		go func(p *floorPair) {
			defer wg.Done()
			p.err = f.startPair(ctx, p)
		}(&pairs[i])
	}
	wg.Wait()
	round.floorDockerCPU = float64(dockerCPUTicks(b)-docker0) / clkTck

	lat := make(startLatencies, 0, len(pairs))
	var errs []error
	for i := range pairs {
		if pairs[i].err != nil {
			errs = append(errs, fmt.Errorf("pair %s: %w", pairs[i].name, pairs[i].err))
			continue
		}
		lat = append(lat, pairs[i].started.Sub(launched).Seconds())
	}
	if err := errors.Join(errs...); err != nil {
		b.Fatalf("floor run: %d of %d pairs failed: %v", len(errs), len(pairs), err)
	}
	sort.Float64s(lat)
	round.floor = lat
}

// labels are the Docker labels of the floor's containers.
func (f *burstFloor) labels() map[string]string { return map[string]string{burstFloorLabel: f.n.id} }

// pod is the pair's CNI identity.
func (f *burstFloor) pod(p *floorPair) network.Pod {
	return network.Pod{ID: p.pauseID, Name: p.name, Namespace: f.n.ns, UID: p.name, NetNS: p.netns}
}

// startPair creates and starts the pause container, sets up its network,
// then creates and starts busybox in its namespaces and reads its StartedAt.
func (f *burstFloor) startPair(ctx context.Context, p *floorPair) error {
	id, err := f.dc.CreateContainer(ctx, p.name+"-pause", &libdocker.ContainerConfig{Image: pauseImage, Labels: f.labels()},
		&libdocker.HostConfig{NetworkMode: "none", IpcMode: "shareable"})
	if err != nil {
		return err
	}
	p.pauseID = id
	if err := f.dc.StartContainer(ctx, id); err != nil {
		return err
	}
	j, err := f.dc.InspectContainer(ctx, id)
	if err != nil {
		return err
	}
	if j.ContainerJSONBase == nil || j.State == nil || j.State.Pid == 0 {
		return fmt.Errorf("pause container %s does not run", id)
	}
	p.netns = fmt.Sprintf("/proc/%d/ns/net", j.State.Pid)
	p.networked = true
	if _, err := f.net.SetUpPod(ctx, f.pod(p)); err != nil {
		return err
	}
	app, err := f.dc.CreateContainer(ctx, p.name+"-app",
		&libdocker.ContainerConfig{Image: busyboxImage, Cmd: []string{"sleep", "3600"}, Labels: f.labels()},
		&libdocker.HostConfig{NetworkMode: libdocker.NetworkMode("container:" + id), IpcMode: libdocker.IpcMode("container:" + id)})
	if err != nil {
		return err
	}
	p.appID = app
	if err := f.dc.StartContainer(ctx, app); err != nil {
		return err
	}
	p.started, err = startedAt(f.dc, app)
	return err
}

// cleanup tears every pair down at once (CNI DEL while the pause container
// still runs, then forced removal of busybox and pause by ID), removes any
// container left with the run's label (one whose create answered an error
// after all), checks that host-local holds no address any more, and returns
// how long it took. Failures fail the benchmark.
func (f *burstFloor) cleanup(pairs []floorPair) time.Duration {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := make([]error, len(pairs))
	var wg sync.WaitGroup
	for i := range pairs {
		wg.Add(1)
		go func(p *floorPair, errp *error) {
			defer wg.Done()
			*errp = f.teardownPair(ctx, p)
		}(&pairs[i], &errs[i])
	}
	wg.Wait()
	left, err := burstList(f.dc, true, burstFloorLabel+"="+f.n.id)
	if err != nil {
		errs = append(errs, err)
	}
	for _, c := range left {
		errs = append(errs, f.dc.RemoveContainer(ctx, c.ID))
	}
	if ips := f.n.reservedIPs(); len(ips) > 0 {
		errs = append(errs, fmt.Errorf("host-local still holds %v after the CNI DELs", ips))
	}
	if err := errors.Join(errs...); err != nil {
		f.n.t.Errorf("floor clean-up: %v", err)
	}
	return time.Since(start)
}

// teardownPair undoes what startPair did, last step first.
func (f *burstFloor) teardownPair(ctx context.Context, p *floorPair) error {
	var errs []error
	if p.networked {
		errs = append(errs, f.net.TearDownPod(ctx, f.pod(p)))
	}
	for _, id := range []string{p.appID, p.pauseID} {
		if id == "" {
			continue
		}
		if err := f.dc.RemoveContainer(ctx, id); err != nil && !errors.Is(err, libdocker.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
