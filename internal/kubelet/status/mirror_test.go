package status

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

func TestMirrorMatchesStatic(t *testing.T) {
	t.Parallel()
	static := staticPod("s", "h1")
	for _, tc := range []struct {
		desc   string
		mirror *v1.Pod
		want   bool
	}{
		{desc: "same hash", mirror: mirrorFor(static, "m", "h1"), want: true},
		{desc: "other hash", mirror: mirrorFor(static, "m", "h2")},
		{desc: "not a mirror pod", mirror: boundPod("s", "m")},
		{desc: "other name", mirror: func() *v1.Pod { p := mirrorFor(static, "m", "h1"); p.Name = "t"; return p }()},
		{desc: "other namespace", mirror: func() *v1.Pod { p := mirrorFor(static, "m", "h1"); p.Namespace = "x"; return p }()},
		{desc: "nil", mirror: nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := MirrorMatchesStatic(tc.mirror, static); got != tc.want {
				t.Fatalf("MirrorMatchesStatic = %v", got)
			}
			if got := IsMirrorPod(tc.mirror); got != (tc.mirror != nil && tc.mirror.Annotations[kubecontainer.ConfigMirrorAnnotationKey] != "") {
				t.Fatalf("IsMirrorPod = %v", got)
			}
		})
	}
}

func TestCreateMirrorPod(t *testing.T) {
	t.Parallel()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}}
	static := staticPod("kube-x", "h1")
	static.Spec.NodeName = ""
	static.Labels = map[string]string{"tier": "control-plane"}
	for _, tc := range []struct {
		desc    string
		objs    []runtime.Object
		static  *v1.Pod
		wantErr bool
	}{
		{desc: "creates the mirror pod", objs: []runtime.Object{node}, static: static},
		{desc: "node missing", static: static, wantErr: true},
		{desc: "no hash annotation", objs: []runtime.Object{node}, static: boundPod("x", "u"), wantErr: true},
		{desc: "mirror already exists", objs: []runtime.Object{node, mirrorFor(static, "m", "h1")}, static: static},
		{desc: "another pod holds the name", objs: []runtime.Object{node, boundPod("kube-x", "other")}, static: static, wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			client := fake.NewClientset(tc.objs...)
			err := NewMirrorClient(client, testNode).CreateMirrorPod(context.Background(), tc.static)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil || tc.desc != "creates the mirror pod" {
				return
			}
			got, err := client.CoreV1().Pods("ns").Get(context.Background(), "kube-x", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !MirrorMatchesStatic(got, static) || got.Spec.NodeName != testNode || got.Labels["tier"] != "control-plane" ||
				got.Annotations[kubecontainer.ConfigSourceAnnotationKey] != kubecontainer.FileSource {
				t.Errorf("mirror pod = %+v", got.ObjectMeta)
			}
			if len(got.OwnerReferences) != 1 {
				t.Fatalf("ownerReferences = %+v", got.OwnerReferences)
			}
			ref := got.OwnerReferences[0]
			if ref.APIVersion != "v1" || ref.Kind != "Node" || ref.Name != testNode || ref.UID != "node-uid" || ref.Controller == nil || !*ref.Controller {
				t.Errorf("ownerReference = %+v", ref)
			}
			if _, ok := static.Annotations[kubecontainer.ConfigMirrorAnnotationKey]; ok {
				t.Error("the static pod was modified")
			}
		})
	}
}

func TestDeleteMirrorPod(t *testing.T) {
	t.Parallel()
	uid := k8stypes.UID("m1")
	for _, tc := range []struct {
		desc        string
		reactErr    error
		wantDeleted bool
		wantErr     bool
	}{
		{desc: "deleted", wantDeleted: true},
		{desc: "already gone", reactErr: apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "kube-x"), wantDeleted: true},
		{desc: "replaced (UID precondition)", reactErr: apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "kube-x", nil), wantDeleted: true},
		{desc: "API error", reactErr: apierrors.NewServiceUnavailable("down"), wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			client := fake.NewClientset(mirrorFor(staticPod("kube-x", "h1"), uid, "h1"))
			var opts metav1.DeleteOptions
			client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				opts = a.(k8stesting.DeleteActionImpl).DeleteOptions
				return tc.reactErr != nil, nil, tc.reactErr
			})
			deleted, err := NewMirrorClient(client, testNode).DeleteMirrorPod(context.Background(), "ns", "kube-x", &uid)
			if deleted != tc.wantDeleted || (err != nil) != tc.wantErr {
				t.Fatalf("deleted=%v err=%v", deleted, err)
			}
			if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 || opts.Preconditions == nil || *opts.Preconditions.UID != uid {
				t.Errorf("delete options = %+v", opts)
			}
		})
	}
}
