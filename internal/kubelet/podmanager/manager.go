package podmanager

import (
	"maps"
	"reflect"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/status"
)

// Changes is what one source update changed.
type Changes struct {
	Adds, Updates, Removes []*v1.Pod
	// Replaced are the pods the updates replaced, by UID.
	Replaced map[k8stypes.UID]*v1.Pod
	// Reconciles are the pods whose only change is their status: written
	// by the kubelet itself, or by others (a controller setting a readiness
	// gate's condition). Upstream's RECONCILE.
	Reconciles []*v1.Pod
	// Mirrors are the namespace/name of the mirror pods the update added,
	// changed or removed: their static pods need a sync.
	Mirrors []string
}

// Manager holds the pods the sources want, by source and by UID (upstream's
// pod config merging plus the pod manager), which of them the kubelet
// admitted, and the API's mirror pods. It is safe for concurrent use.
type Manager struct {
	mu sync.RWMutex
	// active is the kubelet's test of a pod still being active (SetActive);
	// nil counts every pod active.
	active   func(*v1.Pod) bool
	bySource map[string]map[k8stypes.UID]*v1.Pod
	byUID    map[k8stypes.UID]*v1.Pod
	// byName indexes byUID by namespace/name.
	byName map[string]k8stypes.UID
	// admitted holds the pods handed to the pod workers (not rejected). Entries
	// outlive the pod's removal (so the removal can be handled) until
	// RetainAdmitted prunes them.
	admitted map[k8stypes.UID]bool
	// mirrors holds the API's mirror pods (of static pods) by namespace/name:
	// they are not pods to run, only the API's view of the static ones.
	mirrors map[string]*v1.Pod
}

func New() *Manager {
	return &Manager{
		bySource: map[string]map[k8stypes.UID]*v1.Pod{},
		byUID:    map[k8stypes.UID]*v1.Pod{},
		byName:   map[string]k8stypes.UID{},
		admitted: map[k8stypes.UID]bool{},
		mirrors:  map[string]*v1.Pod{},
	}
}

// Apply merges a source update and returns the changes. A SET is diffed against
// what the source sent before; a pod whose UID is new is added, one whose UID is
// gone is removed, and one whose content changed is updated.
func (s *Manager) Apply(u kubecontainer.PodUpdate) Changes {
	s.mu.Lock()
	defer s.mu.Unlock()
	current := s.bySource[u.Source]
	if current == nil {
		current = map[k8stypes.UID]*v1.Pod{}
		s.bySource[u.Source] = current
	}
	var ch Changes
	u.Pods, ch.Mirrors = s.takeMirrors(u)
	switch u.Op {
	case kubecontainer.SET:
		seen := map[k8stypes.UID]bool{}
		for _, p := range u.Pods {
			seen[p.UID] = true
			s.upsert(current, p, &ch)
		}
		for uid, p := range current {
			if !seen[uid] {
				s.delete(current, uid)
				ch.Removes = append(ch.Removes, p)
			}
		}
	case kubecontainer.ADD, kubecontainer.UPDATE:
		for _, p := range u.Pods {
			s.upsert(current, p, &ch)
		}
	case kubecontainer.REMOVE:
		for _, p := range u.Pods {
			if old, ok := current[p.UID]; ok {
				s.delete(current, p.UID)
				ch.Removes = append(ch.Removes, old)
			}
		}
	}
	sortByCreation(ch.Adds)
	sortByCreation(ch.Removes)
	return ch
}

// takeMirrors files the update's mirror pods under mirrors and returns the
// other pods, and the names of the mirrors that changed. A SET replaces every
// Mirror pod the source sent before.
func (s *Manager) takeMirrors(u kubecontainer.PodUpdate) ([]*v1.Pod, []string) {
	next := map[string]*v1.Pod{}
	if u.Op != kubecontainer.SET {
		maps.Copy(next, s.mirrors)
	} else {
		for key, m := range s.mirrors {
			if m.Annotations[kubecontainer.ConfigSourceAnnotationKey] != u.Source {
				next[key] = m
			}
		}
	}
	pods := make([]*v1.Pod, 0, len(u.Pods))
	for _, p := range u.Pods {
		if !status.IsMirrorPod(p) {
			pods = append(pods, p)
			continue
		}
		key := p.Namespace + "/" + p.Name
		if u.Op == kubecontainer.REMOVE {
			delete(next, key)
		} else {
			next[key] = p
		}
	}
	var changed []string
	for key, m := range next {
		if old, ok := s.mirrors[key]; !ok || old.UID != m.UID || podsDiffer(old, m) {
			changed = append(changed, key)
		}
	}
	for key := range s.mirrors {
		if _, ok := next[key]; !ok {
			changed = append(changed, key)
		}
	}
	s.mirrors = next
	sort.Strings(changed)
	return pods, changed
}

// Mirror returns the mirror pod named namespace/name.
func (s *Manager) Mirror(namespace, name string) (*v1.Pod, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.mirrors[namespace+"/"+name]
	return m, ok
}

// AllMirrors returns every mirror pod.
func (s *Manager) AllMirrors() []*v1.Pod {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*v1.Pod, 0, len(s.mirrors))
	for _, m := range s.mirrors {
		out = append(out, m)
	}
	return out
}

// ByFullName returns the desired pod named namespace/name.
func (s *Manager) ByFullName(namespace, name string) (*v1.Pod, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.byUID[s.byName[namespace+"/"+name]]
	return p, ok
}

// upsert stores p, recording an add or, when the content changed, an update.
// A pod whose only change is its status (an API pod the kubelet patched, or
// whose readiness gates a controller set) is stored and recorded as a
// reconcile, so readers see the API's latest status.
func (s *Manager) upsert(current map[k8stypes.UID]*v1.Pod, p *v1.Pod, ch *Changes) {
	old, ok := current[p.UID]
	switch {
	case !ok:
		ch.Adds = append(ch.Adds, p)
	case old == p:
		return
	default:
		changed := podsDiffer(old, p)
		p = keepFirstSeen(p, old)
		switch {
		case changed:
			ch.Updates = append(ch.Updates, p)
			if ch.Replaced == nil {
				ch.Replaced = map[k8stypes.UID]*v1.Pod{}
			}
			ch.Replaced[p.UID] = old
		case !reflect.DeepEqual(old.Status, p.Status):
			ch.Reconciles = append(ch.Reconciles, p)
		}
	}
	current[p.UID] = p
	s.byUID[p.UID] = p
	s.byName[p.Namespace+"/"+p.Name] = p.UID
}

// keepFirstSeen returns p with old's first-seen annotation (a copy when it
// has to change).
func keepFirstSeen(p, old *v1.Pod) *v1.Pod {
	seen, ok := old.Annotations[kubecontainer.ConfigFirstSeenAnnotationKey]
	if !ok || p.Annotations[kubecontainer.ConfigFirstSeenAnnotationKey] == seen {
		return p
	}
	p = p.DeepCopy()
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[kubecontainer.ConfigFirstSeenAnnotationKey] = seen
	return p
}

func (s *Manager) delete(current map[k8stypes.UID]*v1.Pod, uid k8stypes.UID) {
	delete(current, uid)
	for _, pods := range s.bySource {
		if _, ok := pods[uid]; ok {
			return // another source still has it
		}
	}
	if p, ok := s.byUID[uid]; ok && s.byName[p.Namespace+"/"+p.Name] == uid {
		delete(s.byName, p.Namespace+"/"+p.Name)
	}
	delete(s.byUID, uid)
}

// MarkAdmitted records that the pod was handed to the pod workers.
func (s *Manager) MarkAdmitted(uid k8stypes.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byUID[uid]; ok {
		s.admitted[uid] = true
	}
}

// RetainAdmitted forgets the admission of pods no longer stored.
func (s *Manager) RetainAdmitted() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid := range s.admitted {
		if _, ok := s.byUID[uid]; !ok {
			delete(s.admitted, uid)
		}
	}
}

func (s *Manager) IsAdmitted(uid k8stypes.UID) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.admitted[uid]
}

// Get returns the pod with the UID.
func (s *Manager) Get(uid k8stypes.UID) (*v1.Pod, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.byUID[uid]
	return p, ok
}

// All returns every desired pod, oldest first.
func (s *Manager) All() []*v1.Pod {
	s.mu.RLock()
	pods := make([]*v1.Pod, 0, len(s.byUID))
	for _, p := range s.byUID {
		pods = append(pods, p)
	}
	s.mu.RUnlock()
	sortByCreation(pods)
	return pods
}

// SetActive installs the kubelet's test of whether a pod is still active
// (not known terminated by the pod workers, not in a terminal phase): the
// kubelet builds its pod workers and status manager on this manager, so it
// tells it once they exist, before anything runs. Until then every pod counts
// as active.
func (s *Manager) SetActive(active func(*v1.Pod) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active = active
}

// ActivePods returns the desired pods that are active, oldest first: those
// the QoS cgroups are sized for and the CPU, device and eviction managers
// count (upstream's GetActivePods).
func (s *Manager) ActivePods() []*v1.Pod {
	all := s.All()
	s.mu.RLock()
	active := s.active
	s.mu.RUnlock()
	if active == nil {
		return all
	}
	out := all[:0:0]
	for _, p := range all {
		if active(p) {
			out = append(out, p)
		}
	}
	return out
}

// podsDiffer reports whether a source changed a pod in a way the kubelet acts on:
// spec, labels, annotations (but the first-seen time), deletion fields.
func podsDiffer(a, b *v1.Pod) bool {
	if !reflect.DeepEqual(a.Spec, b.Spec) || !maps.Equal(a.Labels, b.Labels) {
		return true
	}
	if !reflect.DeepEqual(a.DeletionTimestamp, b.DeletionTimestamp) ||
		!reflect.DeepEqual(a.DeletionGracePeriodSeconds, b.DeletionGracePeriodSeconds) {
		return true
	}
	return !maps.Equal(withoutSeen(a.Annotations), withoutSeen(b.Annotations))
}

func withoutSeen(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if k != kubecontainer.ConfigFirstSeenAnnotationKey {
			out[k] = v
		}
	}
	return out
}

func sortByCreation(pods []*v1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i].CreationTimestamp, pods[j].CreationTimestamp
		if a.Equal(&b) {
			return pods[i].Namespace+"/"+pods[i].Name < pods[j].Namespace+"/"+pods[j].Name
		}
		return a.Before(&b)
	})
}
