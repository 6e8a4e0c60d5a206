package volumes

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

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
