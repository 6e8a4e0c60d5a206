package options

import (
	"reflect"
	"slices"
	"testing"

	logsapi "k8s.io/component-base/logs/api/v1"
	tracingapi "k8s.io/component-base/tracing/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/kubelet-dockershim/kubelet/internal/app/kubeletconfig"
)

// Every KubeletConfiguration field is classified, once: a field added by a
// new k8s.io/kubelet must be put in one of the lists.
func TestConfigFieldsClassified(t *testing.T) {
	t.Parallel()
	var c kubeletv1beta1.KubeletConfiguration
	kubeletconfig.SetDefaults(&c)
	n := 0
	walkConfigLeaves(reflect.ValueOf(c), reflect.ValueOf(c), "", func(path string, _ bool) {
		n++
		in, out := coveredBy(path, honouredFields), coveredBy(path, notHonouredFields)
		if in == out {
			t.Errorf("%s: honoured %v, not honoured %v: classify it in exactly one list", path, in, out)
		}
	})
	if n < 120 {
		t.Fatalf("only %d leaves walked", n)
	}
	for _, p := range append(slices.Clone(honouredFields), notHonouredFields...) {
		found := false
		walkConfigLeaves(reflect.ValueOf(c), reflect.ValueOf(c), "", func(path string, _ bool) {
			found = found || path == p || coveredBy(path, []string{p})
		})
		if !found {
			t.Errorf("%s is listed but is no field", p)
		}
	}
}

func TestNotHonoured(t *testing.T) {
	t.Parallel()
	def := DefaultConfig().Kubelet
	k := DefaultConfig().Kubelet
	// Upstream's defaults are all what this kubelet does.
	if got := notHonoured(&k, &def); len(got) != 0 {
		t.Fatalf("defaults: %v, want none", got)
	}
	k.ConfigMapAndSecretChangeDetectionStrategy = kubeletv1beta1.TTLCacheChangeDetectionStrategy
	*k.MakeIPTablesUtilChains = false // honoured both ways
	*k.IPTablesDropBit = 16           // upstream only range-checks it
	if got := notHonoured(&k, &def); len(got) != 0 {
		t.Fatalf("Cache, no iptables chains: what this kubelet does: %v", got)
	}
	k.MemoryManagerPolicy = "Static" // honoured
	k.MemoryReservationPolicy = "TieredReservation"
	k.MaxPods = 20                                                              // honoured
	k.HairpinMode = "hairpin-veth"                                              // honoured: only checked, as upstream
	k.Logging.VModule = []logsapi.VModuleItem{{FilePattern: "x", Verbosity: 2}} // honoured
	k.Tracing = &tracingapi.TracingConfiguration{}                              // honoured: spans exported over OTLP
	want := []string{"memoryReservationPolicy"}
	if got := notHonoured(&k, &def); !slices.Equal(got, want) {
		t.Fatalf("notHonoured = %v, want %v", got, want)
	}
}
