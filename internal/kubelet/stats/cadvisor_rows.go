package stats

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubelettypes "k8s.io/kubelet/pkg/types"
)

// rowRef is a cgroup the walk found.
type rowRef struct {
	id     string
	kind   rowKind
	podUID string
	cid    string
}

// criMeta are the CRI lists that label pod and container rows.
type criMeta struct {
	containers map[string]*runtimeapi.Container
	sandboxes  map[string]*runtimeapi.PodSandbox
	pods       map[string]*runtimeapi.PodSandboxMetadata // by pod UID
}

// listMeta asks ListPodSandbox and ListContainers (every state: a cgroup may
// outlive its container's running state by a moment).
func (c *cadvisor) listMeta(ctx context.Context) (*criMeta, error) {
	var (
		sbs          []*runtimeapi.PodSandbox
		cs           []*runtimeapi.Container
		sbErr, csErr error
	)
	c.p.together(
		func() { sbs, sbErr = c.p.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{}) },
		func() { cs, csErr = c.p.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{}) },
	)
	if err := errors.Join(sbErr, csErr); err != nil {
		return nil, fmt.Errorf("list the runtime's sandboxes and containers: %w", err)
	}
	m := &criMeta{containers: make(map[string]*runtimeapi.Container, len(cs)),
		sandboxes: make(map[string]*runtimeapi.PodSandbox, len(sbs)), pods: make(map[string]*runtimeapi.PodSandboxMetadata, len(sbs))}
	for _, sb := range sbs {
		m.sandboxes[sb.GetId()] = sb
		if md := sb.GetMetadata(); md.GetUid() != "" {
			m.pods[md.GetUid()] = md
		}
	}
	for _, ctr := range cs {
		m.containers[ctr.GetId()] = ctr
	}
	return m, nil
}

// syncRows makes rows of the cgroups found, drops the ones gone (closing their
// files) and labels new pod and container rows, listing the runtime again (at
// most every cadvisorRelistMin) when it did not name one of them.
func (c *cadvisor) syncRows(ctx context.Context, refs []rowRef, now time.Time, newRow func(rowRef) *cadRow) error {
	for _, r := range c.rows {
		r.seen = false
	}
	changed, unknown := false, false
	for _, ref := range refs {
		r := c.rows[ref.id]
		if r == nil {
			r = newRow(ref)
			c.rows[ref.id] = r
			c.label(r)
			changed = true
		}
		r.seen = true
		unknown = unknown || !r.labeled
	}
	for id, r := range c.rows {
		if !r.seen {
			c.files.Release(r.dirs.Dirs()...)
			delete(c.rows, id)
			changed = true
		}
	}
	var err error
	if unknown && (c.meta == nil || now.Sub(c.metaAt) >= cadvisorRelistMin) {
		var m *criMeta
		if m, err = c.listMeta(ctx); err == nil {
			c.meta, c.metaAt = m, now
			for _, r := range c.rows {
				if !r.labeled {
					c.label(r)
					changed = true
				}
			}
		}
	}
	if changed || len(c.order) != len(c.rows) {
		c.order = c.order[:0]
		for _, r := range c.rows {
			c.order = append(c.order, r)
		}
		sort.Slice(c.order, func(i, j int) bool { return c.order[i].lbl.full < c.order[j].lbl.full })
	}
	return err
}

// label sets a row's labels: only id for the root, node-allocatable and QoS
// rows; pod and namespace for pod rows; the dockershim-era labels for container
// rows. A pod or container the lists do not name keeps only its id until they do.
func (c *cadvisor) label(r *cadRow) {
	r.lbl = newRowLabels("", r.id, "", "", "", "")
	r.labeled = r.kind == rowRoot || r.kind == rowRaw
	if r.labeled || c.meta == nil {
		return
	}
	switch r.kind {
	case rowPod:
		if md := c.meta.pods[r.podUID]; md != nil {
			r.lbl, r.labeled = newRowLabels("", r.id, "", "", md.GetNamespace(), md.GetName()), true
		}
	case rowContainer:
		if sb := c.meta.sandboxes[r.cid]; sb != nil {
			md := sb.GetMetadata()
			name := dockerName("POD", md, md.GetAttempt())
			r.lbl, r.labeled, r.sandbox = newRowLabels("POD", r.id, c.sandboxImage, name, md.GetNamespace(), md.GetName()), true, true
			r.start = float64(time.Unix(0, sb.GetCreatedAt()).Unix())
			return
		}
		ctr := c.meta.containers[r.cid]
		if ctr == nil {
			return
		}
		labels := ctr.GetLabels()
		md := c.meta.sandboxes[ctr.GetPodSandboxId()].GetMetadata()
		if md == nil {
			md = &runtimeapi.PodSandboxMetadata{Name: labels[kubelettypes.KubernetesPodNameLabel],
				Namespace: labels[kubelettypes.KubernetesPodNamespaceLabel], Uid: labels[kubelettypes.KubernetesPodUIDLabel]}
		}
		cname := labels[kubelettypes.KubernetesContainerNameLabel]
		if cname == "" {
			cname = ctr.GetMetadata().GetName()
		}
		pod, ns := labels[kubelettypes.KubernetesPodNameLabel], labels[kubelettypes.KubernetesPodNamespaceLabel]
		if pod == "" {
			pod, ns = md.GetName(), md.GetNamespace()
		}
		name := dockerName(ctr.GetMetadata().GetName(), md, ctr.GetMetadata().GetAttempt())
		image := c.imageOf(ctr, ns, pod, cname)
		r.lbl, r.labeled = newRowLabels(cname, r.id, image, name, ns, pod), true
		r.start = float64(time.Unix(0, ctr.GetCreatedAt()).Unix())
	}
}

// dockerName is the Docker name the dockershim gives a container:
// k8s_<container>_<pod>_<namespace>_<uid>_<attempt> (container POD for the sandbox).
func dockerName(container string, pod *runtimeapi.PodSandboxMetadata, attempt uint32) string {
	return strings.Join([]string{"k8s", container, pod.GetName(), pod.GetNamespace(), pod.GetUid(),
		strconv.FormatUint(uint64(attempt), 10)}, "_")
}

// imageOf is a container's image as the pod spec names it, as cAdvisor's Docker
// handler reported it (it resolved image IDs to their first tag): the kubelet
// creates containers from the image ID, which ImageSpec.Image (and, on the
// dockershim, UserSpecifiedImage) then holds. The desired pod's spec names the
// image; without it the runtime's answer is taken.
func (c *cadvisor) imageOf(ctr *runtimeapi.Container, namespace, pod, container string) string {
	if img := ctr.GetImage().GetUserSpecifiedImage(); img != "" && !strings.HasPrefix(img, "sha256:") {
		return img
	}
	if c.p.pods != nil {
		if p, ok := c.p.pods.GetPodByName(namespace, pod); ok {
			for _, list := range [][]v1.Container{p.Spec.Containers, p.Spec.InitContainers} {
				for i := range list {
					if list[i].Name == container {
						return list[i].Image
					}
				}
			}
			for i := range p.Spec.EphemeralContainers {
				if p.Spec.EphemeralContainers[i].Name == container {
					return p.Spec.EphemeralContainers[i].Image
				}
			}
		}
	}
	if img := ctr.GetImage().GetUserSpecifiedImage(); img != "" {
		return img
	}
	return ctr.GetImage().GetImage()
}
