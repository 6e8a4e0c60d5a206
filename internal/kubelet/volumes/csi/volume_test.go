package csi

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

func TestPathsAndHandles(t *testing.T) {
	t.Parallel()
	r, err := NewRegistry(Options{NodeName: "n1", RootDir: "/var/lib/kubelet"})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("/var/lib/kubelet/plugins/kubernetes.io/csi/d.example.com/%x", sha256.Sum256([]byte("vol-1")))
	if got := r.stagingDir("d.example.com", "vol-1"); got != want {
		t.Errorf("staging dir %s, want %s", got, want)
	}
	if got, want := EphemeralHandle("uid", "scratch"), fmt.Sprintf("csi-%x", sha256.Sum256([]byte("uidscratch"))); got != want {
		t.Errorf("ephemeral handle %s, want %s", got, want)
	}
	if got, want := attachmentName("vol-1", "d.example.com", "n1"), fmt.Sprintf("csi-%x", sha256.Sum256([]byte("vol-1d.example.comn1"))); got != want {
		t.Errorf("attachment name %s, want %s", got, want)
	}
	if _, err := NewRegistry(Options{NodeName: "n1", RootDir: "relative"}); err == nil {
		t.Error("a relative RootDir was accepted")
	}
}

func TestCSIDriverRules(t *testing.T) {
	t.Parallel()
	file, none := storagev1.FileFSGroupPolicy, storagev1.NoneFSGroupPolicy
	rwo := Volume{FSType: "ext4", AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}}
	rwx := Volume{FSType: "ext4", AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}}
	for _, tc := range []struct {
		desc string
		drv  *storagev1.CSIDriver
		vol  Volume
		want bool
	}{
		{"default policy, RWO with fsType", nil, rwo, true},
		{"default policy, RWX", nil, rwx, false},
		{"default policy, no fsType", nil, Volume{AccessModes: rwo.AccessModes}, false},
		{"File", &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{FSGroupPolicy: &file}}, rwx, true},
		{"None", &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{FSGroupPolicy: &none}}, rwo, false},
	} {
		if got := fsGroupApplies(tc.drv, tc.vol); got != tc.want {
			t.Errorf("%s: fsGroupApplies = %v, want %v", tc.desc, got, tc.want)
		}
	}

	ephemeral := Volume{Driver: "d", Ephemeral: true}
	if err := checkLifecycle(nil, ephemeral); err == nil || !strings.Contains(err.Error(), `volume mode "Ephemeral" not supported by driver d`) {
		t.Errorf("an inline volume of a driver without a CSIDriver: %v", err)
	}
	both := &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}}}
	if err := checkLifecycle(both, ephemeral); err != nil {
		t.Errorf("an Ephemeral driver refused an inline volume: %v", err)
	}
	if err := checkLifecycle(both, Volume{Driver: "d"}); err == nil {
		t.Error("an Ephemeral-only driver accepted a persistent volume")
	}
}

func TestVolumeCapability(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		modes []v1.PersistentVolumeAccessMode
		want  csipb.VolumeCapability_AccessMode_Mode
	}{
		{[]v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{[]v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod}, csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER},
		{[]v1.PersistentVolumeAccessMode{v1.ReadWriteMany}, csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
		{[]v1.PersistentVolumeAccessMode{v1.ReadOnlyMany}, csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY},
	} {
		c := volumeCapability(Volume{FSType: "xfs", AccessModes: tc.modes, MountOptions: []string{"noatime"}})
		if c.GetAccessMode().GetMode() != tc.want || c.GetMount().GetFsType() != "xfs" || c.GetMount().GetMountFlags()[0] != "noatime" {
			t.Errorf("%v: capability %v, want mode %v", tc.modes, c, tc.want)
		}
	}
	if err := (Volume{Driver: "d"}).Validate(); err == nil {
		t.Error("a volume without a handle validated")
	}
}

// TestDriverNamesStayInStagingRoot: a driver name names a directory under
// the staging root, which TearDown unstages and removes; a plugin cannot
// register, and a vol_data.json cannot name, a driver whose name leaves it.
func TestDriverNamesStayInStagingRoot(t *testing.T) {
	t.Parallel()
	r, err := NewRegistry(Options{NodeName: "n1", RootDir: "/var/lib/kubelet"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"csi.example.com", "Hostpath.CSI.k8s.io", "a"} {
		if err := r.ValidatePlugin(name, "/x/csi.sock", []string{"1.0.0"}); err != nil {
			t.Errorf("ValidatePlugin(%q) = %v", name, err)
		}
	}
	for _, name := range []string{"../../../../etc", "a/b", "..", ".", "", "a_b", strings.Repeat("a", 64)} {
		if err := r.ValidatePlugin(name, "/x/csi.sock", []string{"1.0.0"}); err == nil {
			t.Errorf("ValidatePlugin(%q) accepted", name)
		}
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, volDataFileName), []byte(`{"volumeHandle":"v","driverName":"../../../.."}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if d, h, err := VolumeOf(dir); err == nil || d != "" || h != "" {
		t.Errorf("VolumeOf = %q %q %v, want an error and nothing", d, h, err)
	}
	if err := r.TearDown(context.Background(), dir, func(string, string) bool { return false }); err == nil || !strings.Contains(err.Error(), "driver name") {
		t.Errorf("TearDown = %v, want the driver name refused", err)
	}
}
