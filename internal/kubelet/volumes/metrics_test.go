package volumes

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestVolumeMetrics: the desired and actual volume counts by upstream's
// plugin names, a mount timed once when first set up and at every
// failure, the unmount timed per set-up volume, the pod forgotten after.
func TestVolumeMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	m, err := newVolumeMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}, Spec: v1.PodSpec{Volumes: []v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
		{Name: "bare"},
	}}}
	start := time.Now()
	for range 2 { // a second sync refreshes, it mounts nothing new
		m.want(pod, func(vol *v1.Volume) string { return pluginName(&vol.VolumeSource) })
		m.mounted("u1", "scratch", pluginEmptyDir, start, nil)
		m.mounted("u1", "bare", pluginEmptyDir, start, nil)
		m.mounted("u1", "cfg", pluginConfigMap, start, errors.New("configmap not found"))
	}
	want := `
# HELP volume_manager_total_volumes [ALPHA] Number of volumes in Volume Manager
# TYPE volume_manager_total_volumes gauge
volume_manager_total_volumes{plugin_name="kubernetes.io/configmap",state="desired_state_of_world"} 1
volume_manager_total_volumes{plugin_name="kubernetes.io/empty-dir",state="actual_state_of_world"} 2
volume_manager_total_volumes{plugin_name="kubernetes.io/empty-dir",state="desired_state_of_world"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "volume_manager_total_volumes"); err != nil {
		t.Error(err)
	}
	ops := map[string]uint64{}
	count := func() {
		clear(ops)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "storage_operation_duration_seconds" {
				continue
			}
			for _, s := range mf.GetMetric() {
				var key []string
				for _, l := range s.GetLabel() {
					key = append(key, l.GetValue())
				}
				ops[strings.Join(key, ",")] = s.GetHistogram().GetSampleCount()
			}
		}
	}
	count()
	if ops["false,volume_mount,fail-unknown,kubernetes.io/configmap"] != 2 || ops["false,volume_mount,success,kubernetes.io/empty-dir"] != 2 {
		t.Errorf("mount operations %v: want 2 empty-dir successes (first set-up only) and 2 configmap failures", ops)
	}
	m.unmounted("u1", start, nil)
	count()
	if ops["false,volume_unmount,success,kubernetes.io/empty-dir"] != 2 {
		t.Errorf("unmount operations %v: want one per set-up volume", ops)
	}
	if n := testutil.CollectAndCount(m, "volume_manager_total_volumes"); n != 0 {
		t.Errorf("%d volume counts after the pod's teardown, want none", n)
	}
}
