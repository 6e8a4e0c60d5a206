package volumes

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// A failed NFS mount (this host's kernel has no NFS; elsewhere nothing
// answers on 127.0.0.1) is an error naming mount's arguments, as upstream's,
// with the options sorted and "ro" added; the directory is removed.
func TestSetUpNFSMountFails(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	pod := newPod("nfs-pod")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := m.setUpNFS(ctx, pod, "share", &v1.NFSVolumeSource{Server: "127.0.0.1", Path: "/export"}, true, []string{"retry=0", "nfsvers=4.1", ""})
	dir := m.volumePath(pod.UID, NFSPluginDir, "share")
	want := "Mounting arguments: -t nfs -o nfsvers=4.1,retry=0,ro 127.0.0.1:/export " + dir
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want one naming %q", err, want)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("mount point left after the failed mount: %v", err)
	}
}

func TestNFSServer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"nfs.example.com", "nfs.example.com"},
		{"10.0.0.5", "10.0.0.5"},
		{"fd00::5", "[fd00::5]"},
		{"", ""},
		{"-oexec", ""},
		{"a b", ""},
		{"host:/x", ""},
	} {
		got, err := nfsServer(tc.in)
		if got != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("nfsServer(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := newTestManager(t).setUpNFS(context.Background(), newPod("p"), "v", &v1.NFSVolumeSource{Server: "s", Path: "export"}, false, nil); err == nil ||
		!strings.Contains(err.Error(), `path "export" must be an absolute path`) {
		t.Errorf("relative path: %v", err)
	}
}
