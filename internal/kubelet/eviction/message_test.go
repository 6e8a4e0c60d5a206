package eviction

import (
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestEvictionMessage(t *testing.T) {
	t.Parallel()
	memObs := observations{"memory.available": {available: 1500 * mi, capacity: 8 * gi, format: resource.BinarySI}}
	memMet := []Threshold{hardQ("memory.available", "100Mi")}
	withInit := func(name, req string, always bool) podOpt {
		return func(p *v1.Pod) {
			c := v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: list("memory", req)}}
			if always {
				policy := v1.ContainerRestartPolicyAlways
				c.RestartPolicy = &policy
			}
			p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		}
	}
	podLevel := func(req string) podOpt {
		return func(p *v1.Pod) { p.Spec.Resources = &v1.ResourceRequirements{Requests: list("memory", req)} }
	}
	containerMem := func(s statsapi.PodStats, name string, ws int64) statsapi.PodStats {
		s.Containers = append(s.Containers, statsapi.ContainerStats{Name: name, Memory: &statsapi.MemoryStats{WorkingSetBytes: u64(ws)}})
		return s
	}
	for _, tc := range []struct {
		desc     string
		res      v1.ResourceName
		pod      *v1.Pod
		stats    func(*v1.Pod) []statsapi.PodStats
		met      []Threshold
		obs      observations
		want     string
		wantAnno map[string]string
	}{
		{
			desc:  "container over its (empty) request",
			res:   v1.ResourceMemory,
			pod:   newPod("web"),
			stats: func(p *v1.Pod) []statsapi.PodStats { return []statsapi.PodStats{podMem(p, gi)} },
			met:   memMet,
			obs:   observations{"memory.available": {available: 92161 * ki, capacity: 8 * gi, format: resource.BinarySI}},
			want: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 92161Ki. " +
				"Container app was using 1Gi, request is 0, has larger consumption of memory. ",
			wantAnno: map[string]string{"offending_containers": "app", "offending_containers_usage": "1Gi", "starved_resource": "memory"},
		},
		{
			desc:     "container under its request",
			res:      v1.ResourceMemory,
			pod:      newPod("web", requests("memory", "2Gi")),
			stats:    func(p *v1.Pod) []statsapi.PodStats { return []statsapi.PodStats{podMem(p, gi)} },
			met:      memMet,
			obs:      memObs,
			want:     "The node was low on resource: memory. Threshold quantity: 100Mi, available: 1500Mi. ",
			wantAnno: map[string]string{"offending_containers": "", "offending_containers_usage": "", "starved_resource": "memory"},
		},
		{
			desc:     "no stats for the pod: no container part, no annotations",
			res:      v1.ResourceMemory,
			pod:      newPod("web"),
			stats:    func(*v1.Pod) []statsapi.PodStats { return nil },
			met:      memMet,
			obs:      memObs,
			want:     "The node was low on resource: memory. Threshold quantity: 100Mi, available: 1500Mi. ",
			wantAnno: map[string]string{},
		},
		{
			desc:     "no threshold of the resource: no threshold part",
			res:      v1.ResourceMemory,
			pod:      newPod("web", requests("memory", "2Gi")),
			stats:    func(p *v1.Pod) []statsapi.PodStats { return []statsapi.PodStats{podMem(p, gi)} },
			met:      []Threshold{hardQ("nodefs.available", "1Gi")},
			obs:      observations{"nodefs.available": {available: 1, capacity: 2, format: resource.DecimalSI}},
			want:     "The node was low on resource: memory. ",
			wantAnno: map[string]string{"offending_containers": "", "offending_containers_usage": "", "starved_resource": "memory"},
		},
		{
			desc:     "percentage threshold in bytes of capacity",
			res:      v1.ResourceMemory,
			pod:      newPod("web", requests("memory", "2Gi")),
			stats:    func(*v1.Pod) []statsapi.PodStats { return nil },
			met:      []Threshold{pct("memory.available", 0.25)},
			obs:      memObs,
			want:     "The node was low on resource: memory. Threshold quantity: 2Gi, available: 1500Mi. ",
			wantAnno: map[string]string{},
		},
		{
			desc: "init and sidecar containers over their requests, in the stats' order",
			res:  v1.ResourceMemory,
			pod:  newPod("web", requests("memory", "300Mi"), withInit("init", "100Mi", false), withInit("sidecar", "200Mi", true)),
			stats: func(p *v1.Pod) []statsapi.PodStats {
				s := podMem(p, 200*mi) // app under its request
				s = containerMem(s, "sidecar", 250*mi)
				s = containerMem(s, "init", 150*mi)
				s = containerMem(s, "debug", 1*gi) // an ephemeral container: not in the spec
				return []statsapi.PodStats{s}
			},
			met: memMet,
			obs: memObs,
			want: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 1500Mi. " +
				"Container sidecar was using 250Mi, request is 200Mi, has larger consumption of memory. " +
				"Container init was using 150Mi, request is 100Mi, has larger consumption of memory. ",
			wantAnno: map[string]string{"offending_containers": "sidecar,init", "offending_containers_usage": "250Mi,150Mi",
				"starved_resource": "memory"},
		},
		{
			desc:  "pod-level memory request",
			res:   v1.ResourceMemory,
			pod:   newPod("web", podLevel("256Mi")),
			stats: func(p *v1.Pod) []statsapi.PodStats { return []statsapi.PodStats{podMem(p, 300*mi)} },
			met:   memMet,
			obs:   memObs,
			want: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 1500Mi. " +
				"Pod web was using 300Mi, request is 256Mi, has larger consumption of memory. " +
				"Container app was using 300Mi, request is 0, has larger consumption of memory. ",
			wantAnno: map[string]string{"offending_pod": "web", "offending_pod_usage": "300Mi", "offending_containers": "app",
				"offending_containers_usage": "300Mi", "starved_resource": "memory"},
		},
		{
			desc: "ephemeral storage: rootfs plus logs",
			res:  v1.ResourceEphemeralStorage,
			pod:  newPod("web", requests("ephemeral-storage", "100Mi")),
			stats: func(p *v1.Pod) []statsapi.PodStats {
				return []statsapi.PodStats{podDisk(p, 600*mi, 100*mi)}
			},
			met: []Threshold{hardQ("nodefs.available", "2Gi")},
			obs: observations{"nodefs.available": {available: 1536 * mi, capacity: 100 * gi, format: resource.BinarySI}},
			want: "The node was low on resource: ephemeral-storage. Threshold quantity: 2Gi, available: 1536Mi. " +
				"Container app was using 700Mi, request is 100Mi, has larger consumption of ephemeral-storage. ",
			wantAnno: map[string]string{"offending_containers": "app", "offending_containers_usage": "700Mi",
				"starved_resource": "ephemeral-storage"},
		},
		{
			desc:  "pods: no container part",
			res:   resourcePIDs,
			pod:   newPod("web"),
			stats: func(p *v1.Pod) []statsapi.PodStats { return []statsapi.PodStats{podMem(p, gi)} },
			met:   []Threshold{hardQ("pid.available", "1200")},
			obs:   observations{"pid.available": {available: 500, capacity: 4000, format: resource.DecimalSI}},
			want:  "The node was low on resource: pids. Threshold quantity: 1200, available: 500. ",
			wantAnno: map[string]string{"offending_containers": "", "offending_containers_usage": "",
				"starved_resource": "pids"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			msg, anno := evictionMessage(tc.res, tc.pod, podStatsOf(tc.stats(tc.pod)), tc.met, tc.obs)
			if msg != tc.want {
				t.Errorf("message =\n%q\nwant\n%q", msg, tc.want)
			}
			if !maps.Equal(anno, tc.wantAnno) {
				t.Errorf("annotations = %v, want %v", anno, tc.wantAnno)
			}
		})
	}
}
