package volumes

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestParseMountInfo(t *testing.T) {
	t.Parallel()
	data := "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n" +
		"30 22 0:40 / /var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/with\\040space rw master:2 - tmpfs tmpfs rw,size=1024k\n" +
		"31 22 0:41 / /x\\134y rw - tmpfs tmpfs rw\n"
	got, err := parseMountInfo([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := []mountEntry{
		{path: "/", fsType: "ext4"},
		{path: "/var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/with space", fsType: "tmpfs"},
		{path: `/x\y`, fsType: "tmpfs"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if _, err := parseMountInfo([]byte("1 2 3\n")); err == nil {
		t.Error("malformed line accepted")
	}
}

func TestSourceType(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		src  v1.VolumeSource
		want string
	}{
		{desc: "none", want: ""},
		{desc: "configMap", src: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}, want: "configMap"},
		{desc: "pvc", src: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{}}, want: "persistentVolumeClaim"},
		{desc: "csi", src: v1.VolumeSource{CSI: &v1.CSIVolumeSource{}}, want: "csi"},
		{desc: "image", src: v1.VolumeSource{Image: &v1.ImageVolumeSource{}}, want: "image"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := sourceType(&tc.src); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
