package volumes

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
)

// Upstream's volume plugin names, the plugin_name and volume_plugin labels.
const (
	pluginEmptyDir    = "kubernetes.io/empty-dir"
	pluginHostPath    = "kubernetes.io/host-path"
	pluginConfigMap   = "kubernetes.io/configmap"
	pluginSecret      = "kubernetes.io/secret"
	pluginProjected   = "kubernetes.io/projected"
	pluginDownwardAPI = "kubernetes.io/downward-api"
	pluginLocal       = "kubernetes.io/local-volume"
	pluginCSI         = "kubernetes.io/csi"
	pluginNFS         = "kubernetes.io/nfs"
	pluginUnknown     = "N/A"
)

// pluginName is the upstream plugin that serves a volume source.
func pluginName(src *v1.VolumeSource) string {
	switch {
	case src.EmptyDir != nil:
		return pluginEmptyDir
	case src.HostPath != nil:
		return pluginHostPath
	case src.ConfigMap != nil:
		return pluginConfigMap
	case src.Secret != nil:
		return pluginSecret
	case src.Projected != nil:
		return pluginProjected
	case src.DownwardAPI != nil:
		return pluginDownwardAPI
	case src.CSI != nil:
		return pluginCSI
	case src.NFS != nil:
		return pluginNFS
	case sourceType(src) == "":
		return pluginEmptyDir // a volume without a source is an emptyDir
	}
	return pluginUnknown
}

// volumePluginName is the plugin that serves a pod volume: for a claim, the
// plugin of the PV it is bound to (unknown while it is not).
func volumePluginName(vol *v1.Volume, bc *boundClaim) string {
	if bc == nil {
		return pluginName(&vol.VolumeSource)
	}
	switch {
	case bc.pv == nil:
		return pluginUnknown
	case bc.pv.Spec.HostPath != nil:
		return pluginHostPath
	case bc.pv.Spec.Local != nil:
		return pluginLocal
	case bc.pv.Spec.CSI != nil:
		return pluginCSI
	case bc.pv.Spec.NFS != nil:
		return pluginNFS
	}
	return pluginUnknown
}

// volumeMetrics keeps upstream's volume_manager_total_volumes (the volumes
// the pods want, desired_state_of_world, and those set up,
// actual_state_of_world, by plugin; counted at each scrape) and times the
// mounts and unmounts in storage_operation_duration_seconds.
type volumeMetrics struct {
	mu      sync.Mutex
	desired map[k8stypes.UID]map[string]string // pod -> volume -> plugin
	actual  map[k8stypes.UID]map[string]string

	total      *prometheus.Desc
	operations *prometheus.HistogramVec
}

func newVolumeMetrics(reg prometheus.Registerer) (*volumeMetrics, error) {
	m := &volumeMetrics{
		desired: map[k8stypes.UID]map[string]string{},
		actual:  map[k8stypes.UID]map[string]string{},
		total: prometheus.NewDesc("volume_manager_total_volumes", "[ALPHA] Number of volumes in Volume Manager",
			[]string{"plugin_name", "state"}, nil),
		operations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "storage_operation_duration_seconds", Help: "[BETA] Storage operation duration",
			Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600},
		}, []string{"volume_plugin", "operation_name", "status", "migrated"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m, m.operations} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("volumes: register metrics: %w", err)
		}
	}
	return m, nil
}

// Describe implements prometheus.Collector (volume_manager_total_volumes).
func (m *volumeMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.total }

// Collect implements prometheus.Collector.
func (m *volumeMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for state, pods := range map[string]map[k8stypes.UID]map[string]string{
		"desired_state_of_world": m.desired, "actual_state_of_world": m.actual,
	} {
		counts := map[string]int{}
		for _, vols := range pods {
			for _, plugin := range vols {
				counts[plugin]++
			}
		}
		for plugin, n := range counts {
			ch <- prometheus.MustNewConstMetric(m.total, prometheus.GaugeValue, float64(n), plugin, state)
		}
	}
}

// want records the volumes pod wants, each served by plugin(volume).
func (m *volumeMetrics) want(pod *v1.Pod, plugin func(*v1.Volume) string) {
	vols := make(map[string]string, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		vols[pod.Spec.Volumes[i].Name] = plugin(&pod.Spec.Volumes[i])
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.desired[pod.UID] = vols
}

// mounted records a mount attempt of one volume: its first success and
// every failure are timed as volume_mount operations (a volume already set
// up is only refreshed by later syncs, which upstream does not count).
func (m *volumeMetrics) mounted(uid k8stypes.UID, name, plugin string, start time.Time, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.operations.WithLabelValues(plugin, "volume_mount", "fail-unknown", "false").Observe(time.Since(start).Seconds())
		return
	}
	if m.actual[uid] == nil {
		m.actual[uid] = map[string]string{}
	}
	if _, ok := m.actual[uid][name]; ok {
		return
	}
	m.actual[uid][name] = plugin
	m.operations.WithLabelValues(plugin, "volume_mount", "success", "false").Observe(time.Since(start).Seconds())
}

// unmounted records the teardown of every volume of a pod (a volume_unmount
// operation for each one that was set up) and forgets the pod.
func (m *volumeMetrics) unmounted(uid k8stypes.UID, start time.Time, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	status := "success"
	if err != nil {
		status = "fail-unknown"
	}
	for _, plugin := range m.actual[uid] {
		m.operations.WithLabelValues(plugin, "volume_unmount", status, "false").Observe(time.Since(start).Seconds())
	}
	if err == nil {
		delete(m.actual, uid)
		delete(m.desired, uid)
	}
}
