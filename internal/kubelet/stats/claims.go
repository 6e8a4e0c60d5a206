package stats

import (
	"context"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// ClaimVolumeLister lists the mounted volumes of the node's pods that are
// backed by persistent volume claims (the volume manager), by pod UID.
type ClaimVolumeLister interface {
	ClaimVolumes() map[string][]ClaimVolume
}

// ClaimVolume is a pod's volume backed by a claim.
type ClaimVolume struct {
	// Name is the pod's volume name.
	Name string
	// Namespace and Claim name the claim.
	Namespace, Claim string
	// Path is where the volume is mounted, statfs'ed for its figures (as
	// upstream's local volumes); "" when its plugin reports none (hostPath).
	Path string
	// Measure, when set, gives the figures instead (a CSI driver's
	// NodeGetVolumeStats); an error leaves the volume out.
	Measure func(ctx context.Context) (*statsapi.FsStats, error)
}

// claimVolumeStats is upstream's persistent volume stats of a pod: the
// statfs of each measurable claim volume, with its claim reference.
func (p *Provider) claimVolumeStats(ctx context.Context, vols []ClaimVolume) []statsapi.VolumeStats {
	var out []statsapi.VolumeStats
	for _, cv := range vols {
		var fs *statsapi.FsStats
		switch {
		case cv.Measure != nil:
			s, err := cv.Measure(ctx)
			if err != nil {
				p.logger.Debug("claim volume usage", zap.String("volume", cv.Name), zap.Error(err))
				continue
			}
			fs = s
		case cv.Path != "":
			f, err := statFs(cv.Path, p.now())
			if err != nil {
				p.logger.Debug("claim volume usage", zap.String("path", cv.Path), zap.Error(err))
				continue
			}
			fs = f.fsStats(f.at)
		default:
			continue
		}
		out = append(out, statsapi.VolumeStats{
			Name:    cv.Name,
			FsStats: *fs,
			PVCRef:  &statsapi.PVCReference{Name: cv.Claim, Namespace: cv.Namespace},
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// claimVolumesByPod asks the lister, nil without one.
func (p *Provider) claimVolumesByPod() map[string][]ClaimVolume {
	if p.claims == nil {
		return nil
	}
	return p.claims.ClaimVolumes()
}

// Upstream's kubelet_volume_stats_* families (/metrics), one series per claim.
var (
	volumeStatsLabels        = []string{"namespace", "persistentvolumeclaim"}
	volumeStatsCapacityDesc  = prometheus.NewDesc("kubelet_volume_stats_capacity_bytes", "[ALPHA] Capacity in bytes of the volume", volumeStatsLabels, nil)
	volumeStatsAvailableDesc = prometheus.NewDesc("kubelet_volume_stats_available_bytes", "[ALPHA] Number of available bytes in the volume", volumeStatsLabels, nil)
	volumeStatsUsedDesc      = prometheus.NewDesc("kubelet_volume_stats_used_bytes", "[ALPHA] Number of used bytes in the volume", volumeStatsLabels, nil)
	volumeStatsInodesDesc    = prometheus.NewDesc("kubelet_volume_stats_inodes", "[ALPHA] Maximum number of inodes in the volume", volumeStatsLabels, nil)
	volumeStatsInodesFree    = prometheus.NewDesc("kubelet_volume_stats_inodes_free", "[ALPHA] Number of free inodes in the volume", volumeStatsLabels, nil)
	volumeStatsInodesUsed    = prometheus.NewDesc("kubelet_volume_stats_inodes_used", "[ALPHA] Number of used inodes in the volume", volumeStatsLabels, nil)
)

// volumeStatsCollector serves kubelet_volume_stats_* from the claim volumes'
// statfs at scrape time (a claim mounted by several pods counts once).
type volumeStatsCollector struct{ p *Provider }

// VolumeStatsCollector returns the collector of upstream's
// kubelet_volume_stats_* families, for the kubelet's /metrics registry.
func (p *Provider) VolumeStatsCollector() prometheus.Collector { return volumeStatsCollector{p} }

func (c volumeStatsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{volumeStatsCapacityDesc, volumeStatsAvailableDesc, volumeStatsUsedDesc,
		volumeStatsInodesDesc, volumeStatsInodesFree, volumeStatsInodesUsed} {
		ch <- d
	}
}

func (c volumeStatsCollector) Collect(ch chan<- prometheus.Metric) {
	seen := map[statsapi.PVCReference]bool{}
	for _, vols := range c.p.claimVolumesByPod() {
		for _, vs := range c.p.claimVolumeStats(context.Background(), vols) {
			ref := *vs.PVCRef
			if seen[ref] {
				continue
			}
			seen[ref] = true
			gauge := func(d *prometheus.Desc, v *uint64) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(*v), ref.Namespace, ref.Name)
			}
			gauge(volumeStatsCapacityDesc, vs.CapacityBytes)
			gauge(volumeStatsAvailableDesc, vs.AvailableBytes)
			gauge(volumeStatsUsedDesc, vs.UsedBytes)
			gauge(volumeStatsInodesDesc, vs.Inodes)
			gauge(volumeStatsInodesFree, vs.InodesFree)
			gauge(volumeStatsInodesUsed, vs.InodesUsed)
		}
	}
}
