package dns

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/eventtest"
)

const hostResolv = `# generated
nameserver 192.0.2.53
nameserver 192.0.2.54
search corp.example. lab.example
options timeout:2 attempts:3
`

func writeResolv(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func testPod(policy v1.DNSPolicy, hostNet bool, cfg *v1.PodDNSConfig) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec:       v1.PodSpec{DNSPolicy: policy, HostNetwork: hostNet, DNSConfig: cfg},
	}
}

type event struct{ reason, msg string }

// podEvents returns the recorded events, checking each is a Warning about pod.
func podEvents(t *testing.T, rec *eventtest.Recorder, pod *v1.Pod) []event {
	t.Helper()
	var out []event
	for _, e := range rec.Events() {
		if e.Type != v1.EventTypeWarning || e.Pod() != pod {
			t.Errorf("event %v about %v, want a Warning about the pod", e, e.Object)
		}
		out = append(out, event{e.Reason, e.Message})
	}
	return out
}

func TestGetPodDNS(t *testing.T) {
	t.Parallel()
	ndots2 := "2"
	clusterDNS := []net.IP{net.ParseIP("10.96.0.10")}
	for _, tc := range []struct {
		desc       string
		opts       Options
		pod        *v1.Pod
		want       *runtimeapi.DNSConfig
		wantReason string
	}{
		{
			desc: "ClusterFirst uses cluster DNS, cluster searches before host searches, ndots:5",
			opts: Options{ClusterDNS: clusterDNS, ClusterDomain: "cluster.local"},
			pod:  testPod(v1.DNSClusterFirst, false, nil),
			want: &runtimeapi.DNSConfig{
				Servers:  []string{"10.96.0.10"},
				Searches: []string{"shop.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example", "lab.example"},
				Options:  []string{"ndots:5"},
			},
		},
		{
			desc: "ClusterFirst without cluster domain keeps the host searches",
			opts: Options{ClusterDNS: clusterDNS},
			pod:  testPod(v1.DNSClusterFirst, false, nil),
			want: &runtimeapi.DNSConfig{
				Servers:  []string{"10.96.0.10"},
				Searches: []string{"corp.example", "lab.example"},
				Options:  []string{"ndots:5"},
			},
		},
		{
			desc: "ClusterFirst without cluster DNS falls back to Default with a warning",
			opts: Options{ClusterDomain: "cluster.local"},
			pod:  testPod(v1.DNSClusterFirst, false, nil),
			want: &runtimeapi.DNSConfig{
				Servers:  []string{"192.0.2.53", "192.0.2.54"},
				Searches: []string{"corp.example", "lab.example"},
				Options:  []string{"timeout:2", "attempts:3"},
			},
			wantReason: ReasonMissingClusterDNS,
		},
		{
			desc: "ClusterFirst on host network means Default",
			opts: Options{ClusterDNS: clusterDNS, ClusterDomain: "cluster.local"},
			pod:  testPod(v1.DNSClusterFirst, true, nil),
			want: &runtimeapi.DNSConfig{
				Servers:  []string{"192.0.2.53", "192.0.2.54"},
				Searches: []string{"corp.example", "lab.example"},
				Options:  []string{"timeout:2", "attempts:3"},
			},
		},
		{
			desc: "ClusterFirstWithHostNet on host network uses cluster DNS",
			opts: Options{ClusterDNS: clusterDNS, ClusterDomain: "cluster.local"},
			pod:  testPod(v1.DNSClusterFirstWithHostNet, true, nil),
			want: &runtimeapi.DNSConfig{
				Servers:  []string{"10.96.0.10"},
				Searches: []string{"shop.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example", "lab.example"},
				Options:  []string{"ndots:5"},
			},
		},
		{
			desc: "Default copies the host resolv.conf",
			opts: Options{ClusterDNS: clusterDNS, ClusterDomain: "cluster.local"},
			pod:  testPod(v1.DNSDefault, false, nil),
			want: &runtimeapi.DNSConfig{
				Servers:  []string{"192.0.2.53", "192.0.2.54"},
				Searches: []string{"corp.example", "lab.example"},
				Options:  []string{"timeout:2", "attempts:3"},
			},
		},
		{
			desc: "None starts empty and takes dnsConfig",
			opts: Options{ClusterDNS: clusterDNS, ClusterDomain: "cluster.local"},
			pod: testPod(v1.DNSNone, false, &v1.PodDNSConfig{
				Nameservers: []string{"203.0.113.1"},
				Searches:    []string{"my.dns.search.suffix"},
				Options:     []v1.PodDNSConfigOption{{Name: "ndots", Value: &ndots2}, {Name: "edns0"}},
			}),
			want: &runtimeapi.DNSConfig{
				Servers:  []string{"203.0.113.1"},
				Searches: []string{"my.dns.search.suffix"},
				Options:  []string{"ndots:2", "edns0"},
			},
		},
		{
			desc: "None without dnsConfig is empty",
			opts: Options{ClusterDNS: clusterDNS},
			pod:  testPod(v1.DNSNone, false, nil),
			want: &runtimeapi.DNSConfig{},
		},
		{
			desc: "dnsConfig merges into ClusterFirst: duplicates dropped, options overridden",
			opts: Options{ClusterDNS: clusterDNS, ClusterDomain: "cluster.local"},
			pod: testPod(v1.DNSClusterFirst, false, &v1.PodDNSConfig{
				Nameservers: []string{"10.96.0.10", "203.0.113.1"},
				Searches:    []string{"cluster.local", "extra.example"},
				Options:     []v1.PodDNSConfigOption{{Name: "ndots", Value: &ndots2}, {Name: "single-request"}},
			}),
			want: &runtimeapi.DNSConfig{
				Servers:  []string{"10.96.0.10", "203.0.113.1"},
				Searches: []string{"shop.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example", "lab.example", "extra.example"},
				Options:  []string{"ndots:2", "single-request"},
			},
		},
		{
			desc: "more than 3 name servers are cut with a warning",
			opts: Options{ClusterDNS: clusterDNS},
			pod: testPod(v1.DNSDefault, false, &v1.PodDNSConfig{
				Nameservers: []string{"203.0.113.1", "203.0.113.2"},
			}),
			want: &runtimeapi.DNSConfig{
				Servers:  []string{"192.0.2.53", "192.0.2.54", "203.0.113.1"},
				Searches: []string{"corp.example", "lab.example"},
				Options:  []string{"timeout:2", "attempts:3"},
			},
			wantReason: ReasonDNSConfigForming,
		},
		{
			desc: "unknown policy falls back to ClusterFirst",
			opts: Options{ClusterDNS: clusterDNS, ClusterDomain: "cluster.local"},
			pod:  testPod("Bogus", false, nil),
			want: &runtimeapi.DNSConfig{
				Servers:  []string{"10.96.0.10"},
				Searches: []string{"shop.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example", "lab.example"},
				Options:  []string{"ndots:5"},
			},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			rec := &eventtest.Recorder{}
			tc.opts.ResolvConf = writeResolv(t, hostResolv)
			tc.opts.Logger = zaptest.NewLogger(t)
			tc.opts.Recorder = rec
			got, err := NewConfigurer(tc.opts).GetPodDNS(tc.pod)
			if err != nil {
				t.Fatalf("GetPodDNS: %v", err)
			}
			events := podEvents(t, rec, tc.pod)
			assertDNS(t, got, tc.want)
			if tc.wantReason == "" && len(events) != 0 {
				t.Errorf("unexpected events %v", events)
			}
			if tc.wantReason != "" && (len(events) != 1 || events[0].reason != tc.wantReason) {
				t.Errorf("events %v, want one %s", events, tc.wantReason)
			}
		})
	}
}

func assertDNS(t *testing.T, got, want *runtimeapi.DNSConfig) {
	t.Helper()
	norm := func(s []string) []string {
		if len(s) == 0 {
			return nil
		}
		return s
	}
	if !reflect.DeepEqual(norm(got.Servers), norm(want.Servers)) {
		t.Errorf("servers %q, want %q", got.Servers, want.Servers)
	}
	if !reflect.DeepEqual(norm(got.Searches), norm(want.Searches)) {
		t.Errorf("searches %q, want %q", got.Searches, want.Searches)
	}
	if !reflect.DeepEqual(norm(got.Options), norm(want.Options)) {
		t.Errorf("options %q, want %q", got.Options, want.Options)
	}
}

func TestGetPodDNSNoResolvConf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc    string
		nodeIPs []net.IP
		servers []string
	}{
		{desc: "no node IPs", servers: []string{"127.0.0.1"}},
		{desc: "IPv4 node", nodeIPs: []net.IP{net.ParseIP("192.0.2.10")}, servers: []string{"127.0.0.1"}},
		{desc: "IPv6 node", nodeIPs: []net.IP{net.ParseIP("2001:db8::10")}, servers: []string{"::1"}},
		{desc: "dual stack", nodeIPs: []net.IP{net.ParseIP("192.0.2.10"), net.ParseIP("2001:db8::10")}, servers: []string{"127.0.0.1", "::1"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			c := NewConfigurer(Options{NodeIPs: tc.nodeIPs})
			got, err := c.GetPodDNS(testPod(v1.DNSDefault, false, nil))
			if err != nil {
				t.Fatal(err)
			}
			assertDNS(t, got, &runtimeapi.DNSConfig{Servers: tc.servers, Searches: []string{"."}})
		})
	}
}

func TestGetPodDNSMissingResolvConf(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "nope")
	_, err := NewConfigurer(Options{ResolvConf: path}).GetPodDNS(testPod(v1.DNSDefault, false, nil))
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want one naming %s", err, path)
	}
}

func TestResolvConfReread(t *testing.T) {
	t.Parallel()
	path := writeResolv(t, "nameserver 192.0.2.1\n")
	c := NewConfigurer(Options{ResolvConf: path})
	pod := testPod(v1.DNSDefault, false, nil)
	first, err := c.GetPodDNS(pod)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("nameserver 192.0.2.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	second, err := c.GetPodDNS(pod)
	if err != nil {
		t.Fatal(err)
	}
	if first.Servers[0] != "192.0.2.1" || second.Servers[0] != "192.0.2.2" {
		t.Fatalf("servers %v then %v", first.Servers, second.Servers)
	}
}

func TestFitSearchLimits(t *testing.T) {
	t.Parallel()
	many := func(n int, format string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf(format, i)
		}
		return out
	}
	long := strings.Repeat("a", 254)
	// 40 domains of 63 chars: 32 kept by count, then the line (32*64-1 = 2047) fits.
	d63 := func(i int) string { return fmt.Sprintf("%02d", i) + strings.Repeat("x", 61) }
	var big []string
	for i := range 40 {
		big = append(big, d63(i))
	}
	// 10 domains of 250 chars: line 2509 > 2048, keep 8 (8*251-1 = 2007).
	var wide []string
	for i := range 10 {
		wide = append(wide, fmt.Sprintf("%d", i)+strings.Repeat("w", 249))
	}
	for _, tc := range []struct {
		desc     string
		in       []string
		want     []string
		exceeded bool
	}{
		{desc: "under the limits", in: []string{"a", "b"}, want: []string{"a", "b"}},
		{desc: "exactly 32", in: many(32, "d%d.example"), want: many(32, "d%d.example")},
		{desc: "33 cut to 32", in: many(33, "d%d.example"), want: many(32, "d%d.example"), exceeded: true},
		{desc: "too long domain dropped", in: []string{"a", long, "b"}, want: []string{"a", "b"}, exceeded: true},
		{desc: "count then chars", in: big, want: big[:32], exceeded: true},
		{desc: "chars cut from the end", in: wide, want: wide[:8], exceeded: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got, exceeded := FitSearchLimits(append([]string(nil), tc.in...))
			if !reflect.DeepEqual(got, tc.want) || exceeded != tc.exceeded {
				t.Errorf("got %d domains (exceeded %v), want %d (exceeded %v)", len(got), exceeded, len(tc.want), tc.exceeded)
			}
			if n := len(strings.Join(got, " ")); n > MaxDNSSearchListChars {
				t.Errorf("search line %d chars", n)
			}
		})
	}
}

func TestSearchLimitEvent(t *testing.T) {
	t.Parallel()
	rec := &eventtest.Recorder{}
	path := writeResolv(t, "nameserver 192.0.2.1\nsearch "+strings.Join(manyDomains(31), " ")+"\n")
	c := NewConfigurer(Options{
		ClusterDNS: []net.IP{net.ParseIP("10.96.0.10")}, ClusterDomain: "cluster.local", ResolvConf: path, Recorder: rec,
	})
	pod := testPod(v1.DNSClusterFirst, false, nil)
	got, err := c.GetPodDNS(pod)
	if err != nil {
		t.Fatal(err)
	}
	events := podEvents(t, rec, pod)
	if len(got.Searches) != MaxDNSSearchPaths || got.Searches[0] != "shop.svc.cluster.local" {
		t.Fatalf("searches %v", got.Searches)
	}
	if len(events) != 1 || events[0].reason != ReasonDNSConfigForming || !strings.Contains(events[0].msg, "Search Line limits") {
		t.Fatalf("events %v", events)
	}
	if err := c.CheckResolvConf(); err == nil {
		t.Fatal("CheckResolvConf: want an error for 31 host domains next to 3 cluster ones")
	}
}

func manyDomains(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("d%d.example", i)
	}
	return out
}

func TestCheckResolvConf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc    string
		content string
		domain  string
		wantErr bool
	}{
		{desc: "fine", content: hostResolv, domain: "cluster.local"},
		{desc: "29 domains fit next to the cluster ones", content: "search " + strings.Join(manyDomains(29), " "), domain: "cluster.local"},
		{desc: "30 domains do not", content: "search " + strings.Join(manyDomains(30), " "), domain: "cluster.local", wantErr: true},
		{desc: "32 fine without cluster domain", content: "search " + strings.Join(manyDomains(32), " ")},
		{desc: "too long domain", content: "search " + strings.Repeat("z", 254), wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			c := NewConfigurer(Options{ClusterDomain: tc.domain, ResolvConf: writeResolv(t, tc.content)})
			if err := c.CheckResolvConf(); (err != nil) != tc.wantErr {
				t.Fatalf("CheckResolvConf = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
}

func TestParseResolvConf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc    string
		in      string
		want    ResolvConf
		wantErr bool
	}{
		{desc: "empty", in: "", want: ResolvConf{}},
		{desc: "comments and blanks", in: "# c\n; c\n\n   \n", want: ResolvConf{}},
		{
			desc: "full",
			in:   hostResolv,
			want: ResolvConf{
				Nameservers: []string{"192.0.2.53", "192.0.2.54"},
				Searches:    []string{"corp.example", "lab.example"},
				Options:     []string{"timeout:2", "attempts:3"},
			},
		},
		{
			desc: "last search and options lines win, nameservers accumulate",
			in:   "search a b\nnameserver 1.1.1.1\nsearch c\noptions x\noptions y z\nnameserver 2.2.2.2 extra\n",
			want: ResolvConf{Nameservers: []string{"1.1.1.1", "2.2.2.2"}, Searches: []string{"c"}, Options: []string{"y", "z"}},
		},
		{desc: "tabs and leading spaces", in: "  nameserver\t10.0.0.1\n\tsearch\tx.y.\n", want: ResolvConf{Nameservers: []string{"10.0.0.1"}, Searches: []string{"x.y"}}},
		{desc: "root search domain kept", in: "search .\n", want: ResolvConf{Searches: []string{"."}}},
		{desc: "unknown keywords ignored", in: "domain foo\nsortlist 1.2.3.4\n", want: ResolvConf{}},
		{desc: "empty nameserver is an error", in: "nameserver\nnameserver 10.0.0.1\n", want: ResolvConf{Nameservers: []string{"10.0.0.1"}}, wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got, err := ParseResolvConf([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			norm := func(s []string) []string {
				if len(s) == 0 {
					return nil
				}
				return s
			}
			if !reflect.DeepEqual(norm(got.Nameservers), norm(tc.want.Nameservers)) ||
				!reflect.DeepEqual(norm(got.Searches), norm(tc.want.Searches)) ||
				!reflect.DeepEqual(norm(got.Options), norm(tc.want.Options)) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestMergeOptions(t *testing.T) {
	t.Parallel()
	v := func(s string) *string { return &s }
	for _, tc := range []struct {
		desc     string
		existing []string
		pod      []v1.PodDNSConfigOption
		want     []string
	}{
		{desc: "nothing", want: []string{}},
		{desc: "keep existing", existing: []string{"ndots:5", "rotate"}, want: []string{"ndots:5", "rotate"}},
		{desc: "override in place", existing: []string{"ndots:5", "rotate"}, pod: []v1.PodDNSConfigOption{{Name: "ndots", Value: v("1")}}, want: []string{"ndots:1", "rotate"}},
		{desc: "append new", existing: []string{"ndots:5"}, pod: []v1.PodDNSConfigOption{{Name: "edns0"}, {Name: "timeout", Value: v("3")}}, want: []string{"ndots:5", "edns0", "timeout:3"}},
		{desc: "value removed by nil", existing: []string{"ndots:5"}, pod: []v1.PodDNSConfigOption{{Name: "ndots"}}, want: []string{"ndots"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := mergeOptions(tc.existing, tc.pod); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
