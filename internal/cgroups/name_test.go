package cgroups

import (
	"reflect"
	"testing"
)

func TestCgroupNames(t *testing.T) {
	t.Parallel()
	uid := "1234-abcd"
	for _, tc := range []struct {
		name              Name
		cgroupfs, systemd string
	}{
		{name: Name{}, cgroupfs: "/", systemd: "/"},
		{name: Name{"kubepods"}, cgroupfs: "/kubepods", systemd: "/kubepods.slice"},
		{name: Name{"kubepods", "burstable", "pod" + uid}, cgroupfs: "/kubepods/burstable/pod1234-abcd",
			systemd: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd.slice"},
		{name: Name{"kubepods", "pod" + uid}, cgroupfs: "/kubepods/pod1234-abcd",
			systemd: "/kubepods.slice/kubepods-pod1234_abcd.slice"},
		{name: Name{"my-root", "kubepods", "besteffort"}, cgroupfs: "/my-root/kubepods/besteffort",
			systemd: "/my_root.slice/my_root-kubepods.slice/my_root-kubepods-besteffort.slice"},
	} {
		if got := Cgroupfs.Path(tc.name); got != tc.cgroupfs {
			t.Errorf("cgroupfs %v = %q, want %q", tc.name, got, tc.cgroupfs)
		}
		if got := Systemd.Path(tc.name); got != tc.systemd {
			t.Errorf("systemd %v = %q, want %q", tc.name, got, tc.systemd)
		}
		for _, d := range []Kind{Cgroupfs, Systemd} {
			back, err := d.Parse(d.Path(tc.name))
			if err != nil || !reflect.DeepEqual(back, tc.name) && !(len(back) == 0 && len(tc.name) == 0) {
				t.Errorf("%s: Parse(Path(%v)) = %v, %v", d, tc.name, back, err)
			}
		}
	}
	if _, err := NewName(Name{"kubepods"}, "a_b"); err == nil {
		t.Error("a component with '_' accepted")
	}
	if _, err := NewName(nil, "a/b"); err == nil {
		t.Error("a component with '/' accepted")
	}
	if _, err := ParseSystemd("/a--b.slice"); err == nil {
		t.Error("an empty slice component accepted")
	}
	if _, err := ParseSystemd("/kubepods.scope"); err == nil {
		t.Error("a scope accepted as a slice")
	}
	if got := ParseCgroupfs("/foo/bar/"); !reflect.DeepEqual(got, Name{"foo", "bar"}) {
		t.Errorf("ParseCgroupfs = %v", got)
	}
}

func TestPodUIDAndContainerID(t *testing.T) {
	t.Parallel()
	for dir, want := range map[string]string{
		"pod1a2b-3c":                          "1a2b-3c",
		"kubepods-pod1a2b_3c.slice":           "1a2b-3c",
		"kubepods-burstable-pod1a2b_3c.slice": "1a2b-3c",
		"kubepods-besteffort.slice":           "",
		"burstable":                           "",
		"pod":                                 "",
		"kubepods-burstable-pod.slice":        "",
		"docker-0123.scope":                   "",
	} {
		if got, ok := PodUID(dir); got != want || ok != (want != "") {
			t.Errorf("PodUID(%q) = %q, %v; want %q", dir, got, ok, want)
		}
	}
	for dir, want := range map[string]string{
		"0123abcd":                      "0123abcd",
		"docker-0123abcd.scope":         "0123abcd",
		"cri-containerd-0123abcd.scope": "0123abcd",
		"crio-0123abcd.scope":           "0123abcd",
	} {
		if got := ContainerID(dir); got != want {
			t.Errorf("ContainerID(%q) = %q, want %q", dir, got, want)
		}
	}
}
