package volumes

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeBundles answers by name and by signer from maps; a selector's string
// form is part of the signer key.
type fakeBundles struct {
	byName   map[string]string
	bySigner map[string]string
}

func (f fakeBundles) TrustAnchorsByName(_ context.Context, name string, allowMissing bool) ([]byte, error) {
	if b, ok := f.byName[name]; ok {
		return []byte(b), nil
	}
	if allowMissing {
		return []byte{}, nil
	}
	return nil, errors.New("while getting ClusterTrustBundle: not found")
}

func (f fakeBundles) TrustAnchorsBySigner(_ context.Context, signer string, sel *metav1.LabelSelector, allowMissing bool) ([]byte, error) {
	key := signer
	if sel != nil {
		key += "/" + metav1.FormatLabelSelector(sel)
	}
	if b, ok := f.bySigner[key]; ok {
		return []byte(b), nil
	}
	if allowMissing {
		return []byte{}, nil
	}
	return nil, errors.New("combination of signerName and labelSelector matched zero ClusterTrustBundles")
}

func TestCollectTrustBundle(t *testing.T) {
	t.Parallel()
	m, _, _ := newObjectsManager(t)
	m.bundles = fakeBundles{
		byName:   map[string]string{"root": "PEM-ROOT"},
		bySigner: map[string]string{"example.com/s/alive=true": "PEM-SIGNER"},
	}
	ctb := func(p v1.ClusterTrustBundleProjection) v1.VolumeProjection {
		return v1.VolumeProjection{ClusterTrustBundle: &p}
	}
	name, signer, missing := "root", "example.com/s", "gone"
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"alive": "true"}}
	vol := v1.Volume{Name: "ctb", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		DefaultMode: ptrTo(int32(0o644)),
		Sources: []v1.VolumeProjection{
			ctb(v1.ClusterTrustBundleProjection{Name: &name, Path: "by-name.pem"}),
			ctb(v1.ClusterTrustBundleProjection{SignerName: &signer, LabelSelector: sel, Path: "by-signer.pem"}),
			ctb(v1.ClusterTrustBundleProjection{Name: &missing, Optional: ptrTo(true), Path: "optional.pem"}),
		},
	}}}
	for _, tc := range []struct {
		desc    string
		fsGroup *int64
		mode    string
	}{
		{desc: "defaultMode", mode: "644"},
		{desc: "fsGroup makes the files 0600", fsGroup: ptrTo(int64(1000)), mode: "600"},
	} {
		pod := newPodWithVolumes("uid-ctb", vol)
		if tc.fsGroup != nil {
			pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: tc.fsGroup}
		}
		ov := m.collectObjectVolumes(context.Background(), pod)["ctb"]
		if ov.err != nil {
			t.Fatalf("%s: %v", tc.desc, ov.err)
		}
		want := map[string]string{"by-name.pem": tc.mode + ":PEM-ROOT", "by-signer.pem": tc.mode + ":PEM-SIGNER", "optional.pem": tc.mode + ":"}
		if got := payloadStrings(ov.payload); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: payload %q, want %q", tc.desc, got, want)
		}
	}

	// A required bundle that is missing, a selector that selects none, and a
	// projection naming neither fail the volume with upstream's messages.
	bad := newPodWithVolumes("uid-ctb-bad", v1.Volume{Name: "ctb", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{
			ctb(v1.ClusterTrustBundleProjection{Name: &missing, Path: "a"}),
			ctb(v1.ClusterTrustBundleProjection{SignerName: &signer, Path: "b"}),
			ctb(v1.ClusterTrustBundleProjection{Path: "c"}),
		},
	}}})
	ov := m.collectObjectVolumes(context.Background(), bad)["ctb"]
	if ov.err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"while getting ClusterTrustBundle",
		"matched zero ClusterTrustBundles",
		"ClusterTrustBundle projection requires either name or signerName to be set",
	} {
		if !strings.Contains(ov.err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, ov.err)
		}
	}
}
