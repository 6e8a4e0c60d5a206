package devicemanager

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/topologymanager"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/devicemanager/checkpoint"
)

// allocation is the devices of one resource given to one container, with the
// plugin's answer.
type allocation struct {
	ids  []string
	resp *pluginapi.ContainerAllocateResponse
}

// podAllocations: pod UID -> container -> resource -> allocation.
type podAllocations map[string]map[string]map[string]*allocation

func (a podAllocations) get(uid, container, res string) *allocation {
	return a[uid][container][res]
}

func (a podAllocations) set(uid, container, res string, al *allocation) {
	if a[uid] == nil {
		a[uid] = map[string]map[string]*allocation{}
	}
	if a[uid][container] == nil {
		a[uid][container] = map[string]*allocation{}
	}
	a[uid][container][res] = al
}

// inUse lists the devices of res given to any container.
func (a podAllocations) inUse(res string) sets.Set[string] {
	out := sets.New[string]()
	for _, cs := range a {
		for _, rs := range cs {
			if al := rs[res]; al != nil {
				out.Insert(al.ids...)
			}
		}
	}
	return out
}

// entries are the allocations in the checkpoint's form, sorted.
func (a podAllocations) entries() []checkpoint.PodDevicesEntry {
	var out []checkpoint.PodDevicesEntry
	for uid, cs := range a {
		for c, rs := range cs {
			for r, al := range rs {
				resp, err := proto.Marshal(al.resp)
				if err != nil {
					continue
				}
				out = append(out, checkpoint.PodDevicesEntry{PodUID: uid, ContainerName: c, ResourceName: r,
					DeviceIDs: checkpoint.DevicesPerNUMA{-1: al.ids}, AllocResp: resp})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		x, y := out[i], out[j]
		if x.PodUID != y.PodUID {
			return x.PodUID < y.PodUID
		}
		if x.ContainerName != y.ContainerName {
			return x.ContainerName < y.ContainerName
		}
		return x.ResourceName < y.ResourceName
	})
	return out
}

// restore loads checkpoint entries.
func (a podAllocations) restore(entries []checkpoint.PodDevicesEntry) {
	for _, e := range entries {
		resp := &pluginapi.ContainerAllocateResponse{}
		if err := proto.Unmarshal(e.AllocResp, resp); err != nil {
			continue
		}
		var ids []string
		for _, numa := range e.DeviceIDs {
			ids = append(ids, numa...)
		}
		sort.Strings(ids)
		a.set(e.PodUID, e.ContainerName, e.ResourceName, &allocation{ids: ids, resp: resp})
	}
}

// freeInactive drops the allocations of pods no longer active but keep (the
// pod being admitted, not active yet: after a restart it finds its devices
// again), once every pod source has been seen; caller holds mu.
func (m *Manager) freeInactive(keep string) bool {
	if !m.ready() {
		return false
	}
	active := map[string]bool{keep: true}
	for _, p := range m.activePods() {
		active[string(p.UID)] = true
	}
	changed := false
	for uid := range m.allocated {
		if !active[uid] {
			delete(m.allocated, uid)
			changed = true
		}
	}
	return changed
}

// Allocate gives the container the devices its limits ask of each plugin's
// resource (a container that already has them keeps them), calling the
// plugin's GetPreferredAllocation when it offers it and its Allocate, and
// records them in the checkpoint. The pod's earlier init containers' devices
// are reused first, as upstream does. Errors are upstream's.
func (m *Manager) Allocate(pod *v1.Pod, c *v1.Container, isInit bool) error {
	return m.allocate(pod, c, isInit, 0)
}

// allocate is Allocate with a NUMA affinity (0: none).
func (m *Manager) allocate(pod *v1.Pod, c *v1.Container, isInit bool, affinity topologymanager.Mask) error {
	uid := string(pod.UID)
	m.allocMu.Lock()
	defer m.allocMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	changed := m.freeInactive(uid)
	defer func() {
		if changed {
			if err := m.writeCheckpoint(); err != nil {
				m.logger.Error("Write the device checkpoint", zap.Error(err))
			}
		}
	}()
	for _, res := range m.deviceResources(c.Resources.Limits) {
		q := c.Resources.Limits[v1.ResourceName(res)]
		needed := int(q.Value())
		if al := m.allocated.get(uid, c.Name, res); al != nil {
			if len(al.ids) != needed {
				return fmt.Errorf("pod %q container %q changed request for resource %q from %d to %d", uid, c.Name, res, len(al.ids), needed)
			}
			continue
		}
		if needed == 0 {
			continue
		}
		ids, err := m.pick(pod, c, isInit, res, needed, affinity)
		if err != nil {
			return err
		}
		start := time.Now()
		var resp *pluginapi.ContainerAllocateResponse
		p := m.plugins[res]
		m.withoutLock(func() { resp, err = m.allocateRPC(p, ids) })
		m.metrics.allocDuration.WithLabelValues(res).Observe(time.Since(start).Seconds())
		if err != nil {
			return err
		}
		m.allocated.set(uid, c.Name, res, &allocation{ids: ids, resp: resp})
		changed = true
		m.logger.Info("Allocated devices", zap.String("pod", pod.Namespace+"/"+pod.Name), zap.String("container", c.Name),
			zap.String("resourceName", res), zap.Strings("devices", ids))
	}
	return nil
}

// pick chooses needed devices of res for the container (caller holds mu),
// as upstream: the pod's reusable devices first; then, with a NUMA
// affinity, the devices on those nodes (the plugin's preferred ones among
// them when there are more than needed); then the plugin's preferred
// allocation; then by ID (devices on other nodes before devices without
// topology).
func (m *Manager) pick(pod *v1.Pod, c *v1.Container, isInit bool, res string, needed int, affinity topologymanager.Mask) ([]string, error) {
	p := m.plugins[res]
	if p == nil {
		return nil, fmt.Errorf("cannot allocate unregistered device %s", res)
	}
	healthy := sets.New(p.healthy()...)
	if healthy.Len() == 0 {
		return nil, fmt.Errorf("no healthy devices present; cannot allocate unhealthy devices %s", res)
	}
	reusable := m.reusable(pod, c, isInit, res).Intersection(healthy)
	inUse := m.allocated.inUse(res)
	available := healthy.Difference(inUse).Union(reusable)
	if available.Len() < needed {
		return nil, fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d", res, needed, available.Len())
	}
	out := sets.List(reusable)
	if len(out) >= needed {
		return out[:needed], nil
	}
	rest := available.Difference(reusable)
	aligned, unaligned, none := byAffinity(p, rest, affinity)
	if affinity == 0 || !p.hasTopology() {
		aligned, unaligned, none = nil, nil, sets.List(rest)
	}
	take := func(ids []string) {
		for _, id := range ids {
			if len(out) == needed {
				return
			}
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	if len(aligned) > needed-len(out) {
		pref, err := m.preferred(p, res, sets.New(aligned...).Union(reusable), out, needed)
		if err != nil {
			return nil, err
		}
		take(sets.List(sets.New(pref...).Intersection(sets.New(aligned...))))
		take(aligned)
		return out, nil
	}
	take(aligned)
	pref, err := m.preferred(p, res, available, out, needed)
	if err != nil {
		return nil, err
	}
	take(sets.List(sets.New(pref...).Intersection(rest)))
	take(unaligned)
	take(none)
	return out, nil
}

// preferred asks the plugin's GetPreferredAllocation (when it offers it)
// for size devices of available that include must; a usable answer only
// (the right size, within available, holding must), else nothing.
func (m *Manager) preferred(p *plugin, res string, available sets.Set[string], must []string, size int) ([]string, error) {
	if !p.opts.GetGetPreferredAllocationAvailable() {
		return nil, nil
	}
	req := &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
		AvailableDeviceIDs: sets.List(available), MustIncludeDeviceIDs: must, AllocationSize: int32(size)}}}
	var resp *pluginapi.PreferredAllocationResponse
	var err error
	m.withoutLock(func() {
		ctx, cancel := context.WithTimeout(context.Background(), allocateTimeout)
		defer cancel()
		resp, err = p.client.GetPreferredAllocation(ctx, req)
	})
	if err != nil {
		return nil, fmt.Errorf("device plugin GetPreferredAllocation rpc failed with err: %w", err)
	}
	if rs := resp.GetContainerResponses(); len(rs) == 1 {
		pref := sets.New(rs[0].DeviceIDs...)
		if pref.Len() == size && pref.IsSuperset(sets.New(must...)) && available.IsSuperset(pref) {
			return sets.List(pref), nil
		}
	}
	m.logger.Warn("Device plugin's preferred allocation is not usable; choosing by ID", zap.String("resourceName", res))
	return nil, nil
}

// reusable lists the devices of res that the pod's init containers before c
// held and gave up: the regular (non-restartable) init containers', for an
// app container or a later regular init container.
func (m *Manager) reusable(pod *v1.Pod, c *v1.Container, isInit bool, res string) sets.Set[string] {
	out := sets.New[string]()
	if isInit && c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
		return out
	}
	for i := range pod.Spec.InitContainers {
		ic := &pod.Spec.InitContainers[i]
		if isInit && ic.Name == c.Name {
			break
		}
		if ic.RestartPolicy != nil && *ic.RestartPolicy == v1.ContainerRestartPolicyAlways {
			continue
		}
		if al := m.allocated.get(string(pod.UID), ic.Name, res); al != nil {
			out.Insert(al.ids...)
		}
	}
	// Held by the pod's other containers (sidecars, app containers): not free.
	for name, rs := range m.allocated[string(pod.UID)] {
		if al := rs[res]; al != nil && !isRegularInit(pod, name) {
			out.Delete(al.ids...)
		}
	}
	return out
}

func isRegularInit(pod *v1.Pod, name string) bool {
	for i := range pod.Spec.InitContainers {
		ic := &pod.Spec.InitContainers[i]
		if ic.Name == name {
			return ic.RestartPolicy == nil || *ic.RestartPolicy != v1.ContainerRestartPolicyAlways
		}
	}
	return false
}

// withoutLock runs a plugin RPC of an allocation with mu released (the
// caller holds allocMu and mu): other allocations wait on allocMu; health
// updates, registrations and readers go on. The allocation goes on with
// what it read before (upstream's manager releases its mutex the same way).
func (m *Manager) withoutLock(rpc func()) {
	m.mu.Unlock()
	defer m.mu.Lock()
	rpc()
}

// allocateRPC asks the plugin for a container's devices.
func (m *Manager) allocateRPC(p *plugin, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), allocateTimeout)
	defer cancel()
	resp, err := p.client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
	if err != nil {
		return nil, err
	}
	return containerResponse(resp)
}

// containerResponse is the answer for the one container asked about.
func containerResponse(resp *pluginapi.AllocateResponse) (*pluginapi.ContainerAllocateResponse, error) {
	if len(resp.GetContainerResponses()) == 0 {
		return nil, fmt.Errorf("no containers return in allocation response %v", resp)
	}
	return resp.ContainerResponses[0], nil
}

// ContainerOptions is what the container's allocations ask the runtime for,
// merged over its resources (sorted by name): device nodes and mounts (one
// per container path), environment and annotations. Plugins that asked for
// it get PreStartContainer first. CDI devices (one per name) go to the
// runtime, which applies them or refuses them (the built-in shim needs
// Docker 25+ with CDI on).
func (m *Manager) ContainerOptions(pod *v1.Pod, c *v1.Container) (*pluginapi.ContainerAllocateResponse, error) {
	m.mu.Lock()
	rs := m.allocated[string(pod.UID)][c.Name]
	type call struct {
		p   *plugin
		ids []string
	}
	var preStart []call
	names := make([]string, 0, len(rs))
	for r := range rs {
		names = append(names, r)
	}
	sort.Strings(names)
	out := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{}, Annotations: map[string]string{}}
	devices, mounts, cdi := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, r := range names {
		al := rs[r]
		if p := m.plugins[r]; p != nil && p.opts.GetPreStartRequired() {
			preStart = append(preStart, call{p, al.ids})
		}
		for _, d := range al.resp.GetCdiDevices() {
			if !cdi[d.GetName()] {
				cdi[d.GetName()] = true
				out.CdiDevices = append(out.CdiDevices, d)
			}
		}
		for _, d := range al.resp.GetDevices() {
			if !devices[d.ContainerPath] {
				devices[d.ContainerPath] = true
				out.Devices = append(out.Devices, d)
			}
		}
		for _, mt := range al.resp.GetMounts() {
			if !mounts[mt.ContainerPath] {
				mounts[mt.ContainerPath] = true
				out.Mounts = append(out.Mounts, mt)
			}
		}
		for k, v := range al.resp.GetEnvs() {
			out.Envs[k] = v
		}
		for k, v := range al.resp.GetAnnotations() {
			out.Annotations[k] = v
		}
	}
	m.mu.Unlock()
	for _, pc := range preStart {
		ctx, cancel := context.WithTimeout(context.Background(), preStartTimeout)
		_, err := pc.p.client.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIds: pc.ids})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("device plugin PreStartContainer rpc failed with err: %w", err)
		}
	}
	return out, nil
}

// RemovePod gives back every device allocated to the pod's containers and
// records that in the checkpoint: admission releases what it allocated to a
// pod it then rejects, when the pod held no devices before (the devices of
// pods that ended, or of a restored pod that was rejected, are freed at the
// next allocation once the pod is not active). A pod with no devices is a
// no-op.
func (m *Manager) RemovePod(podUID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.allocated[podUID]; !ok {
		return nil
	}
	delete(m.allocated, podUID)
	m.logger.Info("Released the devices of a pod", zap.String("podUID", podUID))
	if err := m.writeCheckpoint(); err != nil {
		return fmt.Errorf("write the device checkpoint: %w", err)
	}
	return nil
}

// PodDevices lists the devices of each container of a pod: container name
// -> resource -> device IDs.
func (m *Manager) PodDevices(uid k8stypes.UID) map[string]map[string][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]map[string][]string{}
	for c, rs := range m.allocated[string(uid)] {
		out[c] = make(map[string][]string, len(rs))
		for r, al := range rs {
			out[c][r] = append([]string(nil), al.ids...)
		}
	}
	return out
}

// AllocatableDevices lists the healthy devices of each connected plugin:
// resource -> device IDs.
func (m *Manager) AllocatableDevices() map[string][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]string{}
	for r, p := range m.plugins {
		if ids := p.healthy(); len(ids) > 0 {
			out[r] = ids
		}
	}
	return out
}
