package e2e

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// upstreamMetric is one line of a metric names file (testdata/upstream_metrics.txt,
// testdata/cadvisor_metrics.txt): name, type, label names, when, help.
type upstreamMetric struct {
	name, typ, when, help string
	labels                []string
}

// readMetricNames reads a metric names file under testdata.
func readMetricNames(t *testing.T, file string) []upstreamMetric {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []upstreamMetric
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.SplitN(line, " ", 5)
		if len(fields) != 5 {
			t.Fatalf("%s: bad line %q", file, line)
		}
		m := upstreamMetric{name: fields[0], typ: fields[1], when: fields[3], help: fields[4]}
		if fields[2] != "-" {
			m.labels = strings.Split(fields[2], ",")
		}
		out = append(out, m)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkUpstreamMetrics checks the /metrics exposition body against
// testdata/upstream_metrics.txt: every series due (always, and cluster when
// the node is joined to an API server) is served, and every listed family
// served has upstream's type, help text and label names.
func checkUpstreamMetrics(t *testing.T, body string, cluster bool) {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	checkFamilies(t, "/metrics", families, readMetricNames(t, "upstream_metrics.txt"), func(when string) bool {
		return when == "always" || when == "cluster" && cluster
	})
}

// checkFamilies checks parsed families against a metric names file: every
// family that due says must be there is served, and every listed family
// served has the listed type, help text and label names.
func checkFamilies(t *testing.T, endpoint string, families map[string]*dto.MetricFamily, wanted []upstreamMetric, due func(when string) bool) {
	t.Helper()
	for _, want := range wanted {
		mf, ok := families[want.name]
		if !ok {
			if due(want.when) {
				t.Errorf("%s does not serve %s", endpoint, want.name)
			}
			continue
		}
		if got := strings.ToLower(mf.GetType().String()); got != want.typ {
			t.Errorf("%s: type %s, want %s", want.name, got, want.typ)
		}
		if mf.GetHelp() != want.help {
			t.Errorf("%s: help %q, want %q", want.name, mf.GetHelp(), want.help)
		}
		for _, m := range mf.GetMetric() {
			if got := labelNames(m); !slices.Equal(got, want.labels) {
				t.Errorf("%s: labels %v, want %v", want.name, got, want.labels)
				break
			}
		}
	}
}

// labelNames are a series' label names, sorted (the exposition sorts them).
func labelNames(m *dto.Metric) []string {
	var out []string
	for _, l := range m.GetLabel() {
		out = append(out, l.GetName())
	}
	slices.Sort(out)
	return out
}
