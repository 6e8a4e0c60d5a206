package stats

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/utils/ptr"
)

const testNetDev = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 530780061  670930    0    0    0     0          0         0 530780061  670930    0    0    0     0       0          0
  eth0: 357933332   20829    3    0    0     0          0         0  1752793   15644    4    0    0     0       0          0
anchor0:   11086     124    0    0    0     0          0         0    75551     731    0   57    0     0       0          0
docker0:       0       0    0    0    0     0          0         0     8734      81    0   13    0     0       0          0
veth2a6f3a9f:      42       1    0    0    0     0          0         0     1080      12    0    0    0     0       0          0
  ens3:  100   1    0    0    0     0          0         0  200   2    0    0    0     0       0          0
`

func TestNetwork(t *testing.T) {
	t.Parallel()
	now := time.Unix(1700000000, 0)
	withoutEth0 := "Inter-|\n face |\n  ens3:  100 1 5 0 0 0 0 0  200 2 6 0 0 0 0 0\n    lo: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n" +
		"  cni0:  7 1 0 0 0 0 0 0  8 1 0 0 0 0 0 0\n"
	route := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"cni0\t0000F50A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n" +
		"ens3\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
	for _, tc := range []struct {
		desc, netDev, route string
		wantNames           []string
		wantDefault         string
		wantRx              uint64
	}{
		{desc: "eth0 is the default; lo, veth and docker are left out", netDev: testNetDev,
			wantNames: []string{"eth0", "anchor0", "ens3"}, wantDefault: "eth0", wantRx: 357933332},
		{desc: "without eth0 the default route's interface", netDev: withoutEth0, route: route,
			wantNames: []string{"ens3", "cni0"}, wantDefault: "ens3", wantRx: 100},
		{desc: "without eth0 nor a default route no default", netDev: withoutEth0,
			wantNames: []string{"ens3", "cni0"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			f := newFakeHost(t)
			f.write("proc/net/dev", tc.netDev)
			if tc.route != "" {
				f.write("proc/net/route", tc.route)
			}
			n, err := f.reader().network(now)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, i := range n.Interfaces {
				names = append(names, i.Name)
			}
			if !equalStrings(names, tc.wantNames) {
				t.Errorf("interfaces = %v, want %v", names, tc.wantNames)
			}
			if n.Name != tc.wantDefault || (tc.wantDefault != "" && *n.RxBytes != tc.wantRx) {
				t.Errorf("default = %q rx %v, want %q rx %d", n.Name, n.RxBytes, tc.wantDefault, tc.wantRx)
			}
			if !n.Time.Time.Equal(now) {
				t.Errorf("time = %v, want %v", n.Time, now)
			}
		})
	}
}

func TestParseNetDevCounters(t *testing.T) {
	t.Parallel()
	ifs, err := parseNetDev([]byte(testNetDev))
	if err != nil {
		t.Fatal(err)
	}
	eth0 := ifs[1]
	if eth0.Name != "eth0" || *eth0.RxBytes != 357933332 || *eth0.RxErrors != 3 || *eth0.TxBytes != 1752793 || *eth0.TxErrors != 4 {
		t.Errorf("eth0 = %s %d %d %d %d", eth0.Name, *eth0.RxBytes, *eth0.RxErrors, *eth0.TxBytes, *eth0.TxErrors)
	}
	if _, err := parseNetDev([]byte("  eth0: 1 2 3\n")); err == nil {
		t.Error("a short line parsed")
	}
}

func TestRlimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc                 string
		pidMax, threads, avg string
		wantMax, wantProcs   *int64
	}{
		{desc: "the smaller limit, tasks from loadavg", pidMax: "4194304\n", threads: "191836\n",
			avg: "0.10 0.20 0.30 2/3518 3715089\n", wantMax: ptr.To[int64](191836), wantProcs: ptr.To[int64](3518)},
		{desc: "only pid_max", pidMax: "32768\n", avg: "0 0 0 1/10 5\n", wantMax: ptr.To[int64](32768), wantProcs: ptr.To[int64](10)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			f := newFakeHost(t)
			if tc.pidMax != "" {
				f.write("proc/sys/kernel/pid_max", tc.pidMax)
			}
			if tc.threads != "" {
				f.write("proc/sys/kernel/threads-max", tc.threads)
			}
			f.write("proc/loadavg", tc.avg)
			r := f.reader().rlimit(time.Now())
			if !ptr.Equal(r.MaxPID, tc.wantMax) || !ptr.Equal(r.NumOfRunningProcesses, tc.wantProcs) {
				t.Errorf("rlimit = %v/%v, want %v/%v", ptr.Deref(r.MaxPID, -1), ptr.Deref(r.NumOfRunningProcesses, -1),
					ptr.Deref(tc.wantMax, -1), ptr.Deref(tc.wantProcs, -1))
			}
		})
	}
	// Without loadavg the count comes from sysinfo.
	f := newFakeHost(t)
	if r := f.reader().rlimit(time.Now()); r.MaxPID != nil || r.NumOfRunningProcesses == nil || *r.NumOfRunningProcesses <= 0 {
		t.Errorf("rlimit without files = %+v, want only a process count from sysinfo", r)
	}
}

func TestWalkDiskUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "a"), make([]byte, 10000))
	mustWrite(t, filepath.Join(dir, "sub", "b"), make([]byte, 5000))
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "sub", "a-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(dir, "sym")); err != nil {
		t.Fatal(err)
	}
	u, err := walkDiskUsage(context.Background(), dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// dir, sub, a (linked twice, counted once), b, sym.
	if u.inodes != 5 {
		t.Errorf("inodes = %d, want 5", u.inodes)
	}
	if u.bytes < 15000 || u.bytes > 15000+5*64*1024 {
		t.Errorf("bytes = %d, want about 15000 plus directory blocks", u.bytes)
	}
	if _, err := walkDiskUsage(context.Background(), filepath.Join(dir, "missing"), time.Now()); err == nil {
		t.Error("walk of a missing directory succeeded")
	}
	f, err := fileUsage(filepath.Join(dir, "sub", "b"))
	if err != nil || f.inodes != 1 || f.bytes < 5000 {
		t.Errorf("fileUsage = %+v, %v", f, err)
	}
}

func mustWrite(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
