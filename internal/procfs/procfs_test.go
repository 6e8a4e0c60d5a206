package procfs

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParseKeyed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		in   string
		want map[string]uint64
	}{
		{
			desc: "cgroup flat keyed, broken and negative lines skipped",
			in:   "cache 10\nrss 20\n\nbroken\nhierarchical_memory_limit 9223372036854771712\nneg -1\n",
			want: map[string]uint64{"cache": 10, "rss": 20, "hierarchical_memory_limit": 9223372036854771712},
		},
		{
			desc: "meminfo keys lose their colon, units stay with the caller",
			in:   "MemTotal:       1000 kB\nInactive(file):  100 kB\nHugePages_Total:       0\n",
			want: map[string]uint64{"MemTotal": 1000, "Inactive(file)": 100, "HugePages_Total": 0},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := ParseKeyed([]byte(tc.in)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ desc, in, want string }{
		{"plain", "/sys/fs/cgroup", "/sys/fs/cgroup"},
		{"space", `/my\040dir`, "/my dir"},
		{"trailing backslash", `/a\`, `/a\`},
		{"bad escape", `/a\9x9`, `/a\9x9`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := UnescapeMountinfo(tc.in); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestReadKeyed: a file is read and parsed; a missing one is an error.
func TestReadKeyed(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "meminfo")
	if err := os.WriteFile(path, []byte("MemTotal:       2048 kB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadKeyed(path)
	if err != nil || !reflect.DeepEqual(got, map[string]uint64{"MemTotal": 2048}) {
		t.Errorf("ReadKeyed = %v, %v", got, err)
	}
	if _, err := ReadKeyed(path + ".missing"); err == nil {
		t.Error("ReadKeyed of a missing file: no error")
	}
}

func TestParseMountinfo(t *testing.T) {
	data := "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n" +
		"30 22 0:40 / /var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/with\\040space rw master:2 - tmpfs tmpfs rw,size=1024k\n" +
		"31 22 0:41 /sub /x\\134y rw - overlay overlay rw,lowerdir=/a\n"
	got, err := ParseMountinfo([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := []Mount{
		{Major: 8, Minor: 1, Root: "/", MountPoint: "/", FSType: "ext4", Source: "/dev/vda1"},
		{Major: 0, Minor: 40, Root: "/", MountPoint: "/var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/with space", FSType: "tmpfs", Source: "tmpfs"},
		{Major: 0, Minor: 41, Root: "/sub", MountPoint: `/x\y`, FSType: "overlay", Source: "overlay"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if _, err := ParseMountinfo([]byte("1 2 3\n")); err == nil {
		t.Error("malformed line accepted")
	}
}

func TestParseUint(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0", 0, true}, {"42", 42, true}, {"18446744073709551615", 1<<64 - 1, true},
		{"18446744073709551616", 0, false}, {"", 0, false}, {"-1", 0, false}, {"1 ", 0, false}, {"0x1", 0, false},
	} {
		if got, ok := ParseUint([]byte(tc.in)); got != tc.want || ok != tc.ok {
			t.Errorf("ParseUint(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
