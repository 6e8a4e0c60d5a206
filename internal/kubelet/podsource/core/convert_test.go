package core

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The internal Pod has the v1 Pod's shape: FromV1 copies by position, so the
// two must agree in every struct's field count, names and kinds. A
// k8s.io/api that adds a field without this mirror being regenerated
// (scripts/controlplane/coretypes) fails here.
func TestSameShapeAsV1(t *testing.T) {
	t.Parallel()
	seen := map[reflect.Type]bool{}
	var walk func(path string, in, v reflect.Type)
	walk = func(path string, in, v reflect.Type) {
		if in == v || seen[in] {
			return
		}
		seen[in] = true
		if in.Kind() != v.Kind() {
			t.Errorf("%s: %s is a %s, v1's %s a %s", path, in, in.Kind(), v, v.Kind())
			return
		}
		switch in.Kind() {
		case reflect.Struct:
			if in.NumField() != v.NumField() {
				t.Errorf("%s: %s has %d fields, v1's %s %d", path, in, in.NumField(), v, v.NumField())
				return
			}
			for i := range in.NumField() {
				fi, fv := in.Field(i), v.Field(i)
				if fi.Name != fv.Name {
					t.Errorf("%s: field %d is %s, v1's %s", path, i, fi.Name, fv.Name)
				}
				walk(path+"."+fi.Name, fi.Type, fv.Type)
			}
		case reflect.Pointer, reflect.Slice:
			walk(path+"[]", in.Elem(), v.Elem())
		case reflect.Map:
			walk(path+"{key}", in.Key(), v.Key())
			walk(path+"{}", in.Elem(), v.Elem())
		}
	}
	walk("Pod", reflect.TypeFor[Pod](), reflect.TypeFor[v1.Pod]())
	if len(seen) < 150 {
		t.Fatalf("only %d types walked", len(seen))
	}
}

// FromV1 carries every value over, deep: the internal pod shares nothing
// with the v1 one.
func TestFromV1(t *testing.T) {
	t.Parallel()
	grace := int64(7)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "b"}},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{Name: "c", Image: "i", Ports: []v1.ContainerPort{{ContainerPort: 80}},
				Resources:      v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")}},
				ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromString("http")}}}}},
		},
	}
	in := FromV1(pod)
	c := in.Spec.Containers[0]
	cpu := c.Resources.Limits[ResourceName(v1.ResourceCPU)]
	if in.Name != "p" || *in.Spec.TerminationGracePeriodSeconds != 7 || c.Name != "c" || c.Ports[0].ContainerPort != 80 ||
		cpu.String() != "250m" || c.ReadinessProbe.HTTPGet.Port.StrVal != "http" {
		t.Fatalf("FromV1 = %+v", in)
	}
	grace = 9
	pod.Labels["a"] = "x"
	if *in.Spec.TerminationGracePeriodSeconds != 7 || in.Labels["a"] != "b" {
		t.Error("the internal pod shares memory with the v1 one")
	}
}
