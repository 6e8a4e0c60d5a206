package eviction

import (
	"slices"
	"strings"
	"testing"
)

func TestParseThresholdConfig(t *testing.T) {
	t.Parallel()
	m := func(kv ...string) map[string]string {
		out := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, tc := range []struct {
		desc        string
		cfg         ThresholdConfig
		want        []string
		wantErr     string // the exact error text (upstream's)
		errContains string // for errors wrapping a parser's
	}{
		{desc: "empty", want: []string{}},
		{
			desc: "hard quantity and percentage, sorted by signal",
			cfg:  ThresholdConfig{Hard: m("nodefs.available", "10%", "memory.available", "100Mi", "pid.available", "1000")},
			want: []string{"memory.available<100Mi", "nodefs.available<10%", "pid.available<1k"},
		},
		{
			desc: "every supported signal",
			cfg: ThresholdConfig{Hard: m("memory.available", "1Mi", "allocatableMemory.available", "1Mi", "nodefs.available", "1Gi",
				"nodefs.inodesFree", "5%", "imagefs.available", "15%", "imagefs.inodesFree", "5%", "containerfs.available", "1Gi",
				"containerfs.inodesFree", "5%", "pid.available", "10%")},
			want: []string{"allocatableMemory.available<1Mi", "containerfs.available<1Gi", "containerfs.inodesFree<5%",
				"imagefs.available<15%", "imagefs.inodesFree<5%", "memory.available<1Mi", "nodefs.available<1Gi",
				"nodefs.inodesFree<5%", "pid.available<10%"},
		},
		{desc: "unsupported hard signal", cfg: ThresholdConfig{Hard: m("mem.available", "1Gi")}, wantErr: "unsupported eviction signal mem.available"},
		{desc: "unsupported soft signal", cfg: ThresholdConfig{Soft: m("cpu.available", "1")}, wantErr: "unsupported eviction signal cpu.available"},
		{
			desc:    "unsupported grace period signal",
			cfg:     ThresholdConfig{SoftGracePeriod: m("disk.available", "30s")},
			wantErr: "unsupported eviction signal disk.available",
		},
		{
			desc:    "unsupported minimum reclaim signal",
			cfg:     ThresholdConfig{MinimumReclaim: m("disk.available", "1Gi")},
			wantErr: "unsupported eviction signal disk.available",
		},
		{
			desc:    "negative percentage",
			cfg:     ThresholdConfig{Hard: m("memory.available", "-5%")},
			wantErr: "eviction percentage threshold memory.available must be >= 0%: -5%",
		},
		{
			desc:    "percentage above 100",
			cfg:     ThresholdConfig{Hard: m("nodefs.available", "150%")},
			wantErr: "eviction percentage threshold nodefs.available must be <= 100%: 150%",
		},
		{desc: "bad percentage", cfg: ThresholdConfig{Hard: m("memory.available", "ten%")}, errContains: "invalid syntax"},
		{
			desc:    "zero quantity",
			cfg:     ThresholdConfig{Hard: m("memory.available", "0")},
			wantErr: "eviction threshold memory.available must be positive: 0",
		},
		{
			desc:    "negative quantity",
			cfg:     ThresholdConfig{Hard: m("memory.available", "-1Gi")},
			wantErr: "eviction threshold memory.available must be positive: -1Gi",
		},
		{
			desc:    "negative soft quantity",
			cfg:     ThresholdConfig{Soft: m("memory.available", "-1Gi"), SoftGracePeriod: m("memory.available", "1m")},
			wantErr: "eviction threshold memory.available must be positive: -1Gi",
		},
		{desc: "bad quantity", cfg: ThresholdConfig{Hard: m("memory.available", "lots")}, errContains: "quantities must match"},
		{
			desc: "0% and 100% drop the threshold",
			cfg:  ThresholdConfig{Hard: m("memory.available", "0%", "nodefs.available", "100%", "imagefs.available", "15%")},
			want: []string{"imagefs.available<15%"},
		},
		{
			desc: "a dropped soft threshold needs no grace period",
			cfg:  ThresholdConfig{Soft: m("memory.available", "0%")},
			want: []string{},
		},
		{
			desc:    "soft without grace period",
			cfg:     ThresholdConfig{Soft: m("memory.available", "300Mi")},
			wantErr: "grace period must be specified for the soft eviction threshold memory.available",
		},
		{
			desc:    "soft with another signal's grace period",
			cfg:     ThresholdConfig{Soft: m("memory.available", "300Mi"), SoftGracePeriod: m("nodefs.available", "1m")},
			wantErr: "grace period must be specified for the soft eviction threshold memory.available",
		},
		{
			desc:    "negative grace period",
			cfg:     ThresholdConfig{Soft: m("memory.available", "300Mi"), SoftGracePeriod: m("memory.available", "-30s")},
			wantErr: "invalid eviction grace period specified: -30s, must be a positive value",
		},
		{
			desc:        "bad grace period",
			cfg:         ThresholdConfig{Soft: m("memory.available", "300Mi"), SoftGracePeriod: m("memory.available", "soon")},
			errContains: `invalid duration "soon"`,
		},
		{
			desc: "hard then soft",
			cfg: ThresholdConfig{Hard: m("memory.available", "100Mi"), Soft: m("memory.available", "300Mi", "nodefs.available", "15%"),
				SoftGracePeriod: m("memory.available", "90s", "nodefs.available", "2m")},
			want: []string{"memory.available<100Mi", "memory.available<300Mi grace=1m30s", "nodefs.available<15% grace=2m0s"},
		},
		{
			desc: "min reclaim attached to the hard and soft thresholds of its signal only",
			cfg: ThresholdConfig{Hard: m("memory.available", "100Mi", "nodefs.available", "1Gi"), Soft: m("memory.available", "300Mi"),
				SoftGracePeriod: m("memory.available", "1m"), MinimumReclaim: m("memory.available", "500Mi", "imagefs.available", "2Gi")},
			want: []string{"memory.available<100Mi +500Mi", "nodefs.available<1Gi", "memory.available<300Mi grace=1m0s +500Mi"},
		},
		{
			desc: "percentage min reclaim",
			cfg:  ThresholdConfig{Hard: m("nodefs.available", "10%"), MinimumReclaim: m("nodefs.available", "5%")},
			want: []string{"nodefs.available<10% +5%"},
		},
		{
			desc: "zero quantity min reclaim is allowed",
			cfg:  ThresholdConfig{Hard: m("nodefs.available", "10%"), MinimumReclaim: m("nodefs.available", "0")},
			want: []string{"nodefs.available<10% +0"},
		},
		{
			desc:    "zero percentage min reclaim",
			cfg:     ThresholdConfig{Hard: m("memory.available", "100Mi"), MinimumReclaim: m("memory.available", "0%")},
			wantErr: "eviction percentage minimum reclaim memory.available must be positive: 0%",
		},
		{
			desc:    "negative percentage min reclaim",
			cfg:     ThresholdConfig{Hard: m("memory.available", "100Mi"), MinimumReclaim: m("memory.available", "-1%")},
			wantErr: "eviction percentage minimum reclaim memory.available must be positive: -1%",
		},
		{
			desc:    "negative quantity min reclaim",
			cfg:     ThresholdConfig{Hard: m("memory.available", "100Mi"), MinimumReclaim: m("memory.available", "-1Gi")},
			wantErr: "negative eviction minimum reclaim specified for memory.available",
		},
		{
			desc: "enforce pods copies the hard memory threshold with its min reclaim",
			cfg: ThresholdConfig{Hard: m("memory.available", "100Mi", "nodefs.available", "10%"), Soft: m("memory.available", "300Mi"),
				SoftGracePeriod: m("memory.available", "30s"), MinimumReclaim: m("memory.available", "50Mi"),
				EnforceNodeAllocatable: []string{"system-reserved", "pods"}},
			want: []string{"memory.available<100Mi +50Mi", "nodefs.available<10%", "memory.available<300Mi grace=30s +50Mi",
				"allocatableMemory.available<100Mi +50Mi"},
		},
		{
			desc: "enforce pods copies a percentage threshold",
			cfg:  ThresholdConfig{Hard: m("memory.available", "5%"), EnforceNodeAllocatable: []string{"pods"}},
			want: []string{"memory.available<5%", "allocatableMemory.available<5%"},
		},
		{
			desc: "without pods enforcement no copy",
			cfg:  ThresholdConfig{Hard: m("memory.available", "100Mi"), EnforceNodeAllocatable: []string{"system-reserved", "kube-reserved"}},
			want: []string{"memory.available<100Mi"},
		},
		{
			desc: "enforce pods without a hard memory threshold",
			cfg: ThresholdConfig{Soft: m("memory.available", "300Mi"), SoftGracePeriod: m("memory.available", "30s"),
				EnforceNodeAllocatable: []string{"pods"}},
			want: []string{"memory.available<300Mi grace=30s"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got, err := ParseThresholdConfig(tc.cfg)
			switch {
			case tc.wantErr != "":
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			case tc.errContains != "":
				if err == nil || !strings.Contains(err.Error(), tc.errContains) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.errContains)
				}
				return
			case err != nil:
				t.Fatalf("ParseThresholdConfig: %v", err)
			}
			if d := describe(got); !slices.Equal(d, tc.want) {
				t.Errorf("thresholds = %q, want %q", d, tc.want)
			}
		})
	}
}

func TestParseThresholdConfigSharesNoMinReclaim(t *testing.T) {
	t.Parallel()
	got, err := ParseThresholdConfig(ThresholdConfig{
		Hard: map[string]string{"memory.available": "100Mi"}, Soft: map[string]string{"memory.available": "200Mi"},
		SoftGracePeriod: map[string]string{"memory.available": "1m"}, MinimumReclaim: map[string]string{"memory.available": "1Gi"},
	})
	if err != nil || len(got) != 2 {
		t.Fatalf("ParseThresholdConfig = %v, %v", got, err)
	}
	for _, th := range got {
		if th.MinReclaim == nil || th.MinReclaim.Value(0) != 1<<30 {
			t.Errorf("%s: min reclaim = %+v, want 1Gi", th.key(), th.MinReclaim)
		}
		if !th.hard() != (th.GracePeriod > 0) {
			t.Errorf("%s: hard() disagrees with grace period %v", th.key(), th.GracePeriod)
		}
	}
}
