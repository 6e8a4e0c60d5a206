package hostsfile

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

const localhostLines = "127.0.0.1\tlocalhost\n" +
	"::1\tlocalhost ip6-localhost ip6-loopback\n" +
	"fe00::0\tip6-localnet\n" +
	"fe00::0\tip6-mcastprefix\n" +
	"fe00::1\tip6-allnodes\n" +
	"fe00::2\tip6-allrouters\n"

func TestRender(t *testing.T) {
	t.Parallel()
	nodeHosts := "127.0.0.1 localhost\n192.0.2.7 node-a\n"
	nodePath := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(nodePath, []byte(nodeHosts), 0o644); err != nil {
		t.Fatal(err)
	}
	aliases := []v1.HostAlias{
		{IP: "10.1.2.3", Hostnames: []string{"foo.remote", "bar.remote"}},
		{IP: "fd00::5", Hostnames: []string{"v6.remote"}},
	}
	for _, tc := range []struct {
		desc string
		in   Input
		want string
	}{
		{
			desc: "no pod IP yet",
			in:   Input{Pod: &v1.Pod{}, Hostname: "web"},
			want: ManagedHeader + localhostLines,
		},
		{
			desc: "one pod IP",
			in:   Input{Pod: &v1.Pod{}, PodIPs: []string{"10.244.1.32"}, Hostname: "web"},
			want: ManagedHeader + localhostLines + "10.244.1.32\tweb\n",
		},
		{
			desc: "dual stack with subdomain",
			in: Input{
				Pod:      &v1.Pod{},
				PodIPs:   []string{"10.244.1.32", "fd00:10:244::20"},
				Hostname: "web-0",
				Domain:   "nginx.shop.svc.cluster.local",
			},
			want: ManagedHeader + localhostLines +
				"10.244.1.32\tweb-0.nginx.shop.svc.cluster.local\tweb-0\n" +
				"fd00:10:244::20\tweb-0.nginx.shop.svc.cluster.local\tweb-0\n",
		},
		{
			desc: "hostAliases",
			in:   Input{Pod: &v1.Pod{Spec: v1.PodSpec{HostAliases: aliases}}, PodIPs: []string{"10.244.1.32"}, Hostname: "web"},
			want: ManagedHeader + localhostLines + "10.244.1.32\tweb\n" +
				"\n# Entries added by HostAliases.\n10.1.2.3\tfoo.remote\tbar.remote\nfd00::5\tv6.remote\n",
		},
		{
			desc: "host network copies the node file",
			in: Input{
				Pod:           &v1.Pod{Spec: v1.PodSpec{HostNetwork: true}},
				PodIPs:        []string{"192.0.2.7"},
				Hostname:      "node-a",
				NodeHostsPath: nodePath,
			},
			want: ManagedHeaderHostNetwork + nodeHosts,
		},
		{
			desc: "host network with hostAliases",
			in: Input{
				Pod:           &v1.Pod{Spec: v1.PodSpec{HostNetwork: true, HostAliases: aliases[:1]}},
				Hostname:      "node-a",
				NodeHostsPath: nodePath,
			},
			want: ManagedHeaderHostNetwork + nodeHosts + "\n# Entries added by HostAliases.\n10.1.2.3\tfoo.remote\tbar.remote\n",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got, err := Render(tc.in)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if string(got) != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestRenderMissingNodeHosts(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "absent")
	_, err := Render(Input{Pod: &v1.Pod{Spec: v1.PodSpec{HostNetwork: true}}, NodeHostsPath: missing})
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("err = %v, want one naming %s", err, missing)
	}
}

func TestWrite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "etc-hosts")
	pod := &v1.Pod{}
	if err := Write(path, pod, []string{"10.0.0.5"}, "web", ""); err != nil {
		t.Fatalf("Write: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(data), "10.0.0.5\tweb\n") {
		t.Errorf("content %q", data)
	}

	// A rewrite with a new IP keeps the inode (the file is bind-mounted into containers).
	before := inode(t, path)
	if err := Write(path, pod, []string{"10.0.0.6"}, "web", ""); err != nil {
		t.Fatal(err)
	}
	if inode(t, path) != before {
		t.Error("rewrite replaced the file instead of rewriting it in place")
	}
	data, _ = os.ReadFile(path)
	if !strings.HasSuffix(string(data), "10.0.0.6\tweb\n") {
		t.Errorf("content after rewrite %q", data)
	}
}

func TestWriteHostNetworkReadsNodeHosts(t *testing.T) {
	t.Parallel()
	node, err := os.ReadFile(NodeHostsPath)
	if err != nil {
		t.Fatalf("this test needs the node's %s: %v", NodeHostsPath, err)
	}
	path := filepath.Join(t.TempDir(), "etc-hosts")
	if err := Write(path, &v1.Pod{Spec: v1.PodSpec{HostNetwork: true}}, nil, "node", ""); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if string(got) != ManagedHeaderHostNetwork+string(node) {
		t.Errorf("got %q", got)
	}
}

func TestWriteUnwritable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "no-such-dir", "etc-hosts")
	if err := Write(path, &v1.Pod{}, nil, "web", ""); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want one naming %s", err, path)
	}
}

// The file is the container's /etc/hosts, read-write: whatever the container
// wrote into it is not read into the kubelet's memory to be compared (it used
// to be, whole, at each container start).
func TestWriteDoesNotReadWhatTheContainerWrote(t *testing.T) {
	path := filepath.Join(t.TempDir(), "etc-hosts")
	pod := &v1.Pod{}
	if err := Write(path, pod, []string{"10.0.0.5"}, "web", ""); err != nil {
		t.Fatal(err)
	}
	const filled = 256 << 20 // sparse: no disk used
	if err := os.Truncate(path, filled); err != nil {
		t.Fatal(err)
	}
	before := inode(t, path)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	allocated := ms.TotalAlloc
	if err := Write(path, pod, []string{"10.0.0.5"}, "web", ""); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&ms)
	if got := ms.TotalAlloc - allocated; got > filled/8 {
		t.Errorf("Write allocated %d bytes over a %d-byte hosts file, want it not read", got, filled)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), ManagedHeader) || !strings.HasSuffix(string(data), "10.0.0.5\tweb\n") || inode(t, path) != before {
		t.Errorf("after Write: %d bytes ending %q, same inode %v; want the managed file rewritten in place", len(data), data[max(0, len(data)-32):], inode(t, path) == before)
	}
}

// Only a regular file is written: a symlink at the path is not followed (the
// file it names is left as it is) and a FIFO does not block the call.
func TestWriteRefusesWhatIsNotARegularFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("untouched\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{link, fifo} {
		done := make(chan error, 1)
		go func() { done <- Write(path, &v1.Pod{}, []string{"10.0.0.5"}, "web", "") }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), path) {
				t.Errorf("Write(%s) = %v, want an error naming it", path, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Write(%s) still blocked after 5s", path)
		}
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "untouched\n" {
		t.Errorf("symlink target now %q, %v; want it untouched", b, err)
	}
}
