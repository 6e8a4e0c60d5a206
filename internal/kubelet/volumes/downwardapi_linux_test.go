package volumes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func dapiPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "shop", UID: "0b6f3c1e-uid",
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"note": "line1\nline2 \"quoted\"", "a.example.com/k": "é"},
		},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name: "app",
				Resources: v1.ResourceRequirements{
					Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m"), v1.ResourceMemory: resource.MustParse("64Mi")},
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("32Mi")},
				},
			}, {Name: "unlimited"}},
			InitContainers: []v1.Container{{
				Name:      "init",
				Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}},
			}},
		},
	}
}

func fieldItem(path, field string) v1.DownwardAPIVolumeFile {
	return v1.DownwardAPIVolumeFile{Path: path, FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: field}}
}

func resItem(path, container, res, divisor string) v1.DownwardAPIVolumeFile {
	sel := &v1.ResourceFieldSelector{ContainerName: container, Resource: res}
	if divisor != "" {
		sel.Divisor = resource.MustParse(divisor)
	}
	return v1.DownwardAPIVolumeFile{Path: path, ResourceFieldRef: sel}
}

func TestCollectDownwardAPI(t *testing.T) {
	t.Parallel()
	m := newTestManager(t) // allocatable cpu 4, memory 8Gi
	for _, tc := range []struct {
		desc    string
		item    v1.DownwardAPIVolumeFile
		want    string
		wantErr string
	}{
		{desc: "name", item: fieldItem("n", "metadata.name"), want: "web"},
		{desc: "namespace", item: fieldItem("n", "metadata.namespace"), want: "shop"},
		{desc: "uid", item: fieldItem("n", "metadata.uid"), want: "0b6f3c1e-uid"},
		{desc: "labels sorted and quoted", item: fieldItem("n", "metadata.labels"), want: "app=\"web\"\ntier=\"front\""},
		{desc: "annotations escaped", item: fieldItem("n", "metadata.annotations"), want: "a.example.com/k=\"é\"\nnote=\"line1\\nline2 \\\"quoted\\\"\""},
		{desc: "one label", item: fieldItem("n", "metadata.labels['tier']"), want: "front"},
		{desc: "one annotation", item: fieldItem("n", "metadata.annotations['a.example.com/k']"), want: "é"},
		{desc: "missing label is empty", item: fieldItem("n", "metadata.labels['nope']"), want: ""},
		{desc: "env-only field", item: fieldItem("n", "status.podIP"), wantErr: "unsupported fieldPath: status.podIP"},
		{desc: "bad subscript", item: fieldItem("n", "metadata.name['x']"), wantErr: "does not support subscript"},
		{desc: "limits.cpu rounds up", item: resItem("r", "app", "limits.cpu", ""), want: "2"},
		{desc: "limits.cpu in millicores", item: resItem("r", "app", "limits.cpu", "1m"), want: "1500"},
		{desc: "requests.cpu in millicores", item: resItem("r", "app", "requests.cpu", "1m"), want: "250"},
		{desc: "limits.memory bytes", item: resItem("r", "app", "limits.memory", ""), want: "67108864"},
		{desc: "limits.memory in Mi", item: resItem("r", "app", "limits.memory", "1Mi"), want: "64"},
		{desc: "requests.memory in Mi", item: resItem("r", "app", "requests.memory", "1Mi"), want: "32"},
		{desc: "unset limit is allocatable cpu", item: resItem("r", "unlimited", "limits.cpu", ""), want: "4"},
		{desc: "unset limit is allocatable memory", item: resItem("r", "unlimited", "limits.memory", "1Gi"), want: "8"},
		{desc: "unset request is 0", item: resItem("r", "unlimited", "requests.memory", ""), want: "0"},
		{desc: "init container", item: resItem("r", "init", "limits.memory", "1Mi"), want: "1024"},
		{desc: "unknown container", item: resItem("r", "ghost", "limits.cpu", ""), wantErr: "container ghost not found"},
		{desc: "no container name", item: resItem("r", "", "limits.cpu", ""), wantErr: "needs a containerName"},
		{desc: "unknown resource", item: resItem("r", "app", "limits.gpu", ""), wantErr: "unsupported container resource"},
		{desc: "empty item", item: v1.DownwardAPIVolumeFile{Path: "x"}, wantErr: "neither fieldRef nor resourceFieldRef"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			src := &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{tc.item}}
			payload, err := m.collectDownwardAPI(dapiPod(), src)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := string(payload[tc.item.Path].Data); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCollectDownwardAPIModes(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	i400, i600 := int32(0o400), int32(0o600)
	withMode := fieldItem("a", "metadata.name")
	withMode.Mode = &i400
	for _, tc := range []struct {
		desc        string
		defaultMode *int32
		want        map[string]int32
	}{
		{desc: "default 0644", want: map[string]int32{"a": 0o400, "b": 0o644}},
		{desc: "defaultMode", defaultMode: &i600, want: map[string]int32{"a": 0o400, "b": 0o600}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			src := &v1.DownwardAPIVolumeSource{DefaultMode: tc.defaultMode, Items: []v1.DownwardAPIVolumeFile{withMode, fieldItem("b", "metadata.name")}}
			payload, err := m.collectDownwardAPI(dapiPod(), src)
			if err != nil {
				t.Fatal(err)
			}
			for p, mode := range tc.want {
				if payload[p].Mode != mode {
					t.Errorf("%s: mode %o, want %o", p, payload[p].Mode, mode)
				}
			}
		})
	}
}

func TestMountVolumesDownwardAPI(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	ctx := context.Background()
	i400 := int32(0o400)
	labelsItem := fieldItem("podinfo/labels", "metadata.labels")
	labelsItem.Mode = &i400
	pod := dapiPod()
	pod.Spec.Volumes = []v1.Volume{{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
		Items: []v1.DownwardAPIVolumeFile{fieldItem("name", "metadata.name"), labelsItem, resItem("mem", "app", "limits.memory", "1Mi")},
	}}}}

	infos, err := m.MountVolumes(ctx, pod)
	if err != nil {
		t.Fatalf("MountVolumes: %v", err)
	}
	info := infos["podinfo"]
	wantDir := filepath.Join(m.podsDir, string(pod.UID), "volumes", "kubernetes.io~downward-api", "podinfo")
	if info != (VolumeInfo{HostPath: wantDir, ReadOnly: true, Managed: true}) {
		t.Fatalf("info %+v", info)
	}
	if fs := mustFSType(t, wantDir); fs != "tmpfs" {
		t.Errorf("downwardAPI dir is on %q, want tmpfs", fs)
	}
	for rel, want := range map[string]string{"name": "web", "podinfo/labels": "app=\"web\"\ntier=\"front\"", "mem": "64"} {
		if got, err := os.ReadFile(filepath.Join(wantDir, rel)); err != nil || string(got) != want {
			t.Errorf("%s = %q (%v), want %q", rel, got, err, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(wantDir, "podinfo/labels")); err != nil || fi.Mode().Perm() != 0o400 {
		t.Errorf("labels mode %v (%v), want 0400", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(wantDir, "name")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("name mode %v (%v), want 0644", fi.Mode(), err)
	}
	firstData, err := os.Readlink(filepath.Join(wantDir, "..data"))
	if err != nil {
		t.Fatal(err)
	}

	// A resync without changes keeps the data directory.
	if _, err := m.MountVolumes(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if d, _ := os.Readlink(filepath.Join(wantDir, "..data")); d != firstData {
		t.Errorf("unchanged resync moved ..data from %s to %s", firstData, d)
	}

	// Changed labels are written atomically into a new data directory.
	pod.Labels["tier"] = "back"
	if _, err := m.MountVolumes(ctx, pod); err != nil {
		t.Fatal(err)
	}
	d, _ := os.Readlink(filepath.Join(wantDir, "..data"))
	if d == firstData {
		t.Error("..data did not move after a label change")
	}
	if _, err := os.Stat(filepath.Join(wantDir, firstData)); !os.IsNotExist(err) {
		t.Errorf("old data dir %s still there: %v", firstData, err)
	}
	if got, _ := os.ReadFile(filepath.Join(wantDir, "podinfo/labels")); string(got) != "app=\"web\"\ntier=\"back\"" {
		t.Errorf("labels after update %q", got)
	}

	if err := m.UnmountVolumes(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if mps := mustMountPoints(t, m.podsDir); len(mps) != 0 {
		t.Fatalf("still mounted: %v", mps)
	}
}

func TestMountVolumesDownwardAPIBadItemTouchesNothing(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	pod := dapiPod()
	pod.Spec.Volumes = []v1.Volume{{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
		Items: []v1.DownwardAPIVolumeFile{fieldItem("ip", "status.podIP")},
	}}}}
	_, err := m.MountVolumes(context.Background(), pod)
	if err == nil || !strings.Contains(err.Error(), `volume "podinfo": item "ip": unsupported fieldPath`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(m.podDir(pod.UID)); !os.IsNotExist(err) {
		t.Fatalf("pod dir created for a failing volume: %v", err)
	}
}

func TestMountVolumesDownwardAPIFSGroup(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	gid := int64(2345)
	pod := dapiPod()
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &gid}
	i400 := int32(0o400)
	item := fieldItem("name", "metadata.name")
	item.Mode = &i400
	pod.Spec.Volumes = []v1.Volume{{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
		Items: []v1.DownwardAPIVolumeFile{item},
	}}}}
	ctx := context.Background()
	infos, err := m.MountVolumes(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(infos["podinfo"].HostPath, "name")
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Gid != uint32(gid) || fi.Mode().Perm() != 0o440 {
		t.Errorf("file gid %d mode %v, want %d and 0440 (read-only group access)", st.Gid, fi.Mode().Perm(), gid)
	}
	// The fsGroup bits do not count as a change on resync.
	dataLink := filepath.Join(infos["podinfo"].HostPath, "..data")
	before, _ := os.Readlink(dataLink)
	if _, err := m.MountVolumes(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Readlink(dataLink); after != before {
		t.Errorf("resync rewrote the data (%s -> %s)", before, after)
	}
	if err := m.UnmountVolumes(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
}

func TestFormatMap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		in   map[string]string
		want string
	}{
		{desc: "nil", in: nil, want: ""},
		{desc: "one", in: map[string]string{"k": "v"}, want: `k="v"`},
		{desc: "sorted", in: map[string]string{"b": "2", "a": "1", "c": ""}, want: "a=\"1\"\nb=\"2\"\nc=\"\""},
		{desc: "escapes", in: map[string]string{"k": "tab\there\\ \x00"}, want: `k="tab\there\\ \x00"`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := FormatMap(tc.in); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
