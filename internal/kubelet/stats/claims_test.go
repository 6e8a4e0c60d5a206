package stats

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

type claimList map[string][]ClaimVolume

func (c claimList) ClaimVolumes() map[string][]ClaimVolume { return c }

// TestClaimVolumeStats: a pod's claim volumes follow its ephemeral ones in
// its volume stats, with their claim and the statfs figures of their mount;
// they do not count in its ephemeral storage; a hostPath claim (no path)
// reports nothing. The same figures are served as kubelet_volume_stats_*.
func TestClaimVolumeStats(t *testing.T) {
	e := newTestEnv(t)
	before, err := e.p.Summary(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	local := t.TempDir()
	e.p.claims = claimList{"u1": {
		{Name: "data", Namespace: "default", Claim: "data-web-0", Path: local},
		{Name: "host", Namespace: "default", Claim: "host", Path: ""},
	}}
	s, err := e.p.Summary(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	web := s.Pods[0]
	var names []string
	for _, v := range web.VolumeStats {
		names = append(names, v.Name)
	}
	if !slices.Equal(names, []string{"cache", "token", "data"}) {
		t.Fatalf("volumes = %v, want the ephemeral cache and token, then the claim's data", names)
	}
	data := web.VolumeStats[2]
	if data.PVCRef == nil || data.PVCRef.Name != "data-web-0" || data.PVCRef.Namespace != "default" ||
		data.CapacityBytes == nil || *data.CapacityBytes == 0 || data.UsedBytes == nil || data.Inodes == nil || data.InodesUsed == nil ||
		*data.AvailableBytes > *data.CapacityBytes {
		t.Errorf("claim volume stats = %+v", data)
	}
	if web.VolumeStats[0].PVCRef != nil {
		t.Errorf("an emptyDir has a claim: %+v", web.VolumeStats[0].PVCRef)
	}
	if got, want := *web.EphemeralStorage.UsedBytes, *before.Pods[0].EphemeralStorage.UsedBytes; got != want {
		t.Errorf("ephemeral storage used %d with the claim, %d without", got, want)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(e.p.VolumeStatsCollector())
	text := gatherText(t, reg)
	for _, fam := range []string{"capacity_bytes", "available_bytes", "used_bytes", "inodes", "inodes_free", "inodes_used"} {
		want := "kubelet_volume_stats_" + fam + `{namespace="default",persistentvolumeclaim="data-web-0"} `
		if strings.Count(text, want) != 1 {
			t.Errorf("/metrics lacks one %s:\n%s", want, text)
		}
	}
	if strings.Contains(text, `persistentvolumeclaim="host"`) {
		t.Errorf("a hostPath claim has volume stats:\n%s", text)
	}
}
