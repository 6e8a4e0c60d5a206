package stats

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/kubelet-dockershim/kubelet/internal/procfs"
)

// TestCadvisorFilesystems: the root row reports the partitions cAdvisor's
// kubelet plugins handle (statfs types by source, tmpfs by mountpoint, overlay
// by source and device number; the first mount of a source wins), an app
// container its writable layer plus its own attempt's log files on the
// partition holding the layer, without inode series; the sandbox none; the
// usage is refreshed in the background, asked again only after
// cadvisorFsPeriod.
func TestCadvisorFilesystems(t *testing.T) {
	p, f := cadvisorTestEnv(t)
	rt := p.runtime.(*critest.FakeRuntimeService)
	layers, tmpfs, ovl := t.TempDir(), t.TempDir(), t.TempDir()
	var st unix.Stat_t
	if err := unix.Stat(layers, &st); err != nil {
		t.Fatal(err)
	}
	dev := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	f.write("proc/self/mountinfo", strings.Join(append(f.mounts,
		"23 1 0:21 / / rw - ext4 /dev/vda rw",
		"40 23 "+dev+" / "+layers+" rw - ext4 /dev/layers rw",
		"41 23 "+dev+" /sub "+layers+"/bind rw - ext4 /dev/layers rw",
		"42 23 0:50 / "+tmpfs+" rw - tmpfs tmpfs rw",
		"43 23 0:51 / "+ovl+" rw - overlay overlay rw,lowerdir=/a",
		"44 23 0:52 / /proc rw - proc proc rw",
		"45 23 0:53 / /mnt/nfs rw - nfs4 server:/export rw",
	), "\n")+"\n")
	logs := t.TempDir()
	p.podLogsDir = logs
	dir := filepath.Join(logs, "default_web_u1", "app")
	var want uint64 = 1000
	for name, size := range map[string]int{"0.log": 8192, "0.log.20260101-000000": 4096, "1.log": 65536} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		if u, err := fileUsage(path); err == nil && strings.HasPrefix(name, "0.") {
			want += u.bytes
		}
	}
	rt.SetFakeContainerStats([]*runtimeapi.ContainerStats{{
		Attributes: &runtimeapi.ContainerAttributes{Id: "c1"},
		WritableLayer: &runtimeapi.FilesystemUsage{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: layers},
			UsedBytes: u64(1000)},
	}})
	clock := time.Now()
	p.now = func() time.Time { return clock }
	h := p.CadvisorMetrics(CadvisorOptions{SandboxImage: "pause:3.10"})
	refreshed := make(chan struct{}, 1)
	h.(*cadvisor).fs.refreshed = func() { refreshed <- struct{}{} }
	waitRefresh := func() {
		t.Helper()
		select {
		case <-refreshed:
		case <-time.After(10 * time.Second):
			t.Fatal("the usage refresh did not end")
		}
	}
	scrapeCadvisor(t, h, false)
	waitRefresh() // the refresh runs in the background; the next scrape serves it
	fams := scrapeCadvisor(t, h, false)

	capacity, err := statFs(layers, clock)
	if err != nil {
		t.Fatal(err)
	}
	c1 := map[string]string{"id": "/kubepods/burstable/podu1/c1", "container": "app", "device": "/dev/layers"}
	if got := series(fams, "container_fs_usage_bytes", c1); len(got) != 1 || value(got[0]) != float64(want) {
		t.Errorf("container usage %v, want %d (layer 1000 + attempt 0's logs)", got, want)
	}
	if got := series(fams, "container_fs_limit_bytes", c1); len(got) != 1 || value(got[0]) != float64(capacity.capacity) {
		t.Errorf("container limit %v, want %d", got, capacity.capacity)
	}
	for _, name := range []string{"container_fs_inodes_total", "container_fs_inodes_free"} {
		if got := series(fams, name, map[string]string{"id": c1["id"]}); len(got) != 0 {
			t.Errorf("%s served for a container: %v", name, got)
		}
	}
	if got := series(fams, "container_fs_usage_bytes", map[string]string{"container": "POD"}); len(got) != 0 {
		t.Errorf("sandbox fs series: %v", got)
	}
	var devices []string
	for _, m := range series(fams, "container_fs_limit_bytes", map[string]string{"id": "/"}) {
		for _, l := range m.GetLabel() {
			if l.GetName() == "device" {
				devices = append(devices, l.GetValue())
			}
		}
	}
	wantDevs := []string{"/dev/layers", "/dev/vda", tmpfs, "overlay_0-51"}
	if strings.Join(devices, ",") != strings.Join(wantDevs, ",") {
		t.Errorf("root partitions %v, want %v", devices, wantDevs)
	}
	if got := series(fams, "container_fs_inodes_free", map[string]string{"id": "/", "device": "/dev/layers"}); len(got) != 1 || value(got[0]) == 0 {
		t.Errorf("root inodes free %v", got)
	}
	if got := series(fams, "container_fs_usage_bytes", map[string]string{"id": "/", "device": "/dev/layers"}); len(got) != 1 || value(got[0]) != float64(capacity.used) {
		t.Errorf("root usage %v, want capacity - free %d", got, capacity.used)
	}

	rt.SetFakeContainerStats([]*runtimeapi.ContainerStats{{
		Attributes: &runtimeapi.ContainerAttributes{Id: "c1"},
		WritableLayer: &runtimeapi.FilesystemUsage{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: layers},
			UsedBytes: u64(5000)},
	}})
	clock = clock.Add(cadvisorFsPeriod - time.Second)
	fams = scrapeCadvisor(t, h, false)
	if n := count(rt.GetCalls(), "ListContainerStats"); n != 1 {
		t.Errorf("ListContainerStats asked %d times within the period, want 1", n)
	}
	if got := series(fams, "container_fs_usage_bytes", c1); len(got) != 1 || value(got[0]) != float64(want) {
		t.Errorf("usage within the period %v, want %d", got, want)
	}
	clock = clock.Add(2 * time.Second)
	scrapeCadvisor(t, h, false)
	waitRefresh()
	fams = scrapeCadvisor(t, h, false)
	if got := series(fams, "container_fs_usage_bytes", c1); len(got) != 1 || value(got[0]) != float64(want+4000) {
		t.Errorf("usage after the period %v, want %d", got, want+4000)
	}
}

func TestChoosePartitions(t *testing.T) {
	t.Parallel()
	mounts := []procfs.Mount{
		{Major: 8, Minor: 1, MountPoint: "/var", FSType: "xfs", Source: "/dev/sda1"},
		{Major: 0, Minor: 30, MountPoint: "/", FSType: "overlay", Source: "overlay"},
		{Major: 8, Minor: 1, MountPoint: "/var/lib/x", FSType: "xfs", Source: "/dev/sda1"},
		{Major: 0, Minor: 31, MountPoint: "/dev/shm", FSType: "tmpfs", Source: "shm"},
		{Major: 0, Minor: 32, MountPoint: "/sys/fs/cgroup", FSType: "cgroup2", Source: "cgroup2"},
		{Major: 0, Minor: 33, MountPoint: "/mnt/a b", FSType: "vfat", Source: `/dev/"x"`},
	}
	var got []string
	for _, p := range choosePartitions(mounts) {
		got = append(got, p.key+"@"+p.mountPoint)
	}
	want := []string{`/dev/\"x\"@/mnt/a b`, "/dev/sda1@/var", "/dev/shm@/dev/shm", "overlay@/", "overlay_0-30@/"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("partitions\n%v, want\n%v", got, want)
	}
}
