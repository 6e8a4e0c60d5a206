package kuberuntime

import (
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// goldenContainer is a fixed spec whose hash is pinned: a change of the hash
// function would restart every container on kubelet upgrade.
func goldenContainer() v1.Container {
	return v1.Container{
		Name:    "web",
		Image:   "nginx:1.27",
		Command: []string{"nginx", "-g", "daemon off;"},
		Env:     []v1.EnvVar{{Name: "MODE", Value: "prod"}},
		Ports:   []v1.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: v1.ProtocolTCP}},
		Resources: v1.ResourceRequirements{
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("128Mi")},
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
		},
		TerminationMessagePath:   "/dev/termination-log",
		TerminationMessagePolicy: v1.TerminationMessageReadFile,
		ImagePullPolicy:          v1.PullIfNotPresent,
	}
}

func TestHashContainer(t *testing.T) {
	t.Parallel()
	base := goldenContainer()
	tests := []struct {
		desc     string
		mutate   func(c *v1.Container)
		wantSame bool
	}{
		{desc: "unchanged", mutate: func(c *v1.Container) {}, wantSame: true},
		{desc: "deep copy", mutate: func(c *v1.Container) { *c = *c.DeepCopy() }, wantSame: true},
		{desc: "decoded again from JSON (a re-read manifest)", mutate: func(c *v1.Container) {
			data, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			*c = v1.Container{}
			if err := json.Unmarshal(data, c); err != nil {
				t.Fatal(err)
			}
		}, wantSame: true},
		// Resources change in place (resize); the rest of a container is
		// immutable or part of a static pod's UID: none of it is hashed.
		{desc: "resources", mutate: func(c *v1.Container) { c.Resources.Limits[v1.ResourceCPU] = resource.MustParse("1") }, wantSame: true},
		{desc: "env", mutate: func(c *v1.Container) { c.Env[0].Value = "dev" }, wantSame: true},
		{desc: "probe", mutate: func(c *v1.Container) { c.LivenessProbe = &v1.Probe{PeriodSeconds: 5} }, wantSame: true},
		{desc: "image", mutate: func(c *v1.Container) { c.Image = "nginx:1.28" }},
		{desc: "name", mutate: func(c *v1.Container) { c.Name = "web2" }},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			c := goldenContainer()
			tc.mutate(&c)
			same := hashContainer(&c) == hashContainer(&base)
			if same != tc.wantSame {
				t.Errorf("hash same = %v, want %v", same, tc.wantSame)
			}
			if containerChanged(&c, hashContainer(&base)) == tc.wantSame {
				t.Errorf("containerChanged disagrees with the hash")
			}
		})
	}
}

// TestHashContainerIsUpstreams pins upstream 1.37's value for upstream's own
// test container (pkg/kubelet/container TestHashContainer): a container
// created by upstream's kubelet carries this hash, and ours must agree or the
// container restarts when the binary is switched.
func TestHashContainerIsUpstreams(t *testing.T) {
	t.Parallel()
	c := v1.Container{
		Name:  "test_container",
		Image: "foo/image:v1",
		Args:  []string{"/bin/sh", "-c", "echo abc"},
		Ports: []v1.ContainerPort{{ContainerPort: 8001}},
	}
	if got := hashContainer(&c); got != 0x8e45cbd0 {
		t.Errorf("hash = %x, want upstream's 8e45cbd0", got)
	}
	if got := hashContainer(ptrTo(goldenContainer())); got != 0xe220f96 {
		t.Errorf("hash of the golden container = %x", got)
	}
}

func ptrTo[T any](v T) *T { return &v }
