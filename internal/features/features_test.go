package features

import (
	"slices"
	"strings"
	"testing"
)

// TestSetFromMap: settings are taken, refused with upstream's errors for an
// unknown gate and for a locked gate set off its lock.
func TestSetFromMap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc     string
		settings map[string]bool
		wantErr  string
	}{
		{"beta off", map[string]bool{"HugepageAwareEviction": false}, ""},
		{"all alpha", map[string]bool{"AllAlpha": true}, ""},
		{"unknown", map[string]bool{"NoSuchGate": true}, "unrecognized feature gate: NoSuchGate"},
		{"locked to its lock", map[string]bool{"AggregatedDiscoveryRemoveBetaType": true}, ""},
		{"locked off its lock", map[string]bool{"AggregatedDiscoveryRemoveBetaType": false},
			"cannot set feature gate AggregatedDiscoveryRemoveBetaType to false, feature is locked to true"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			fg, err := New()
			if err != nil {
				t.Fatal(err)
			}
			err = fg.SetFromMap(tc.settings)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("SetFromMap: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("SetFromMap: %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestDefaults: the set has upstream's defaults (spot checks of each stage)
// and lists the non-GA gates in its help, as upstream's --help does.
func TestDefaults(t *testing.T) {
	t.Parallel()
	fg, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if !fg.Enabled(HugepageAwareEviction) {
		t.Error("HugepageAwareEviction (beta, on in 1.37) is off")
	}
	if len(upstreamGates) < 200 {
		t.Errorf("%d gates, want the whole upstream set", len(upstreamGates))
	}
	known := strings.Join(fg.KnownFeatures(), "\n")
	if !strings.Contains(known, "HugepageAwareEviction=true|false (BETA - default=true)") || !strings.Contains(known, "AllAlpha=true|false") {
		t.Errorf("KnownFeatures lacks upstream's lines: %s", known)
	}
}

// TestNoEffect names the gates set off their default that the kubelet does
// not act on, not those at their default or honoured.
func TestNoEffect(t *testing.T) {
	t.Parallel()
	got := NoEffect(map[string]bool{
		"HugepageAwareEviction":        false, // honoured
		"APIResponseCompression":       true,  // the default
		"EventedPLEG":                  true,  // honoured
		"CPUManagerPolicyAlphaOptions": true,
		"AllBeta":                      true,
		"NoSuchGate":                   true, // refused elsewhere
	})
	if want := []string{"AllBeta=true", "CPUManagerPolicyAlphaOptions=true"}; !slices.Equal(got, want) {
		t.Errorf("NoEffect = %v, want %v", got, want)
	}
}
