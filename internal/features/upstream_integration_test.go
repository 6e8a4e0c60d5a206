package features

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// TestIntegrationUpstreamGates compares the gates --help lists with those
// upstream's kubelet v1.37.1 lists (built, cached, by
// scripts/build-controlplane.sh next to the control plane): the same names,
// stages and defaults, line for line. A new upstream version means
// regenerating upstream.go (see scripts/controlplane/featuregates).
func TestIntegrationUpstreamGates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	bin, err := controlplane.UpstreamBinary(ctx, "upstream-kubelet")
	if err != nil {
		t.Fatal(err)
	}
	help, err := exec.CommandContext(ctx, bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v", bin, err)
	}
	var upstream []string
	in := false
	for _, line := range strings.Split(string(help), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "--feature-gates"):
			in = true
		case in && strings.Contains(line, "=true|false"):
			// The flag's own deprecation note follows the last gate, and a
			// gate whose default moves with --min-compatibility-version (which
			// this kubelet does not take) names both defaults: keep the first.
			line, _, _ = strings.Cut(line, " (DEPRECATED: ")
			if first, _, ok := strings.Cut(line, "), or "); ok {
				line = first + ")"
			}
			upstream = append(upstream, line)
		case in && strings.HasPrefix(line, "--"):
			in = false
		}
	}
	fg, err := New()
	if err != nil {
		t.Fatal(err)
	}
	ours := fg.KnownFeatures()
	slices.Sort(upstream)
	slices.Sort(ours)
	if len(upstream) < 100 {
		t.Fatalf("only %d gates in upstream's --help: %s", len(upstream), help)
	}
	for _, l := range upstream {
		if !slices.Contains(ours, l) {
			t.Errorf("upstream lists %q, we do not", l)
		}
	}
	for _, l := range ours {
		if !slices.Contains(upstream, l) {
			t.Errorf("we list %q, upstream does not", l)
		}
	}
}
