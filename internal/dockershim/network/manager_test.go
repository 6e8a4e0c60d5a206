package network

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"go.uber.org/zap/zaptest"
)

func TestNewValidatesOptions(t *testing.T) {
	t.Parallel()
	good := Options{ConfDir: "/etc/cni/net.d", BinDirs: []string{"/usr/lib/cni"}, CacheDir: "/var/lib/cni/cache"}
	for _, tc := range []struct {
		desc    string
		mutate  func(*Options)
		wantErr string // the field the error must name; "" for success
	}{
		{desc: "valid", mutate: func(*Options) {}},
		{desc: "no conf dir", mutate: func(o *Options) { o.ConfDir = "" }, wantErr: "ConfDir"},
		{desc: "no bin dirs", mutate: func(o *Options) { o.BinDirs = nil }, wantErr: "BinDirs"},
		{desc: "empty bin dir", mutate: func(o *Options) { o.BinDirs = []string{"/usr/lib/cni", ""} }, wantErr: "BinDirs[1]"},
		{desc: "no cache dir", mutate: func(o *Options) { o.CacheDir = "" }, wantErr: "CacheDir"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			opts := good
			opts.BinDirs = append([]string(nil), good.BinDirs...)
			tc.mutate(&opts)
			m, err := New(opts)
			if tc.wantErr == "" {
				if err != nil || m == nil {
					t.Fatalf("New = %v, %v", m, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New error = %v, want one naming %s", err, tc.wantErr)
			}
		})
	}
}

// newFakeManager returns a Manager over fake plugins and a conf dir holding
// testConflistA.
func newFakeManager(t *testing.T, withConfig bool) (*Manager, *fakeCNI) {
	t.Helper()
	dir := t.TempDir()
	if withConfig {
		writeFiles(t, dir, map[string]string{"10-a.conflist": testConflistA})
	}
	m, err := New(Options{ConfDir: dir, BinDirs: []string{t.TempDir()}, CacheDir: t.TempDir(), Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeCNI{}
	m.cni = fake
	return m, fake
}

func TestSetUpPodCleansUpOnAFreshContext(t *testing.T) {
	t.Parallel()
	m, fake := newFakeManager(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fake.onAdd = cancel // the request is cancelled while ADD runs

	pod := Pod{ID: "c0ffee", Name: "web", Namespace: "prod", UID: "u1", NetNS: "/run/netns/x",
		PortMappings: []PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}}}
	_, err := m.SetUpPod(ctx, pod)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("SetUpPod = %v, want the ADD error (context canceled)", err)
	}
	dels := fake.delCalls()
	if len(dels) != 1 {
		t.Fatalf("%d DEL calls, want 1", len(dels))
	}
	d := dels[0]
	if d.ctxErr != nil {
		t.Errorf("cleanup DEL ran on a done context: %v", d.ctxErr)
	}
	if d.network != "net-a" || d.rt.ContainerID != pod.ID || d.rt.IfName != "eth0" || d.rt.NetNS != pod.NetNS {
		t.Errorf("cleanup DEL = %+v", d)
	}
	if _, ok := d.rt.CapabilityArgs["portMappings"]; !ok {
		t.Errorf("cleanup DEL lacks the portMappings the ADD had: %v", d.rt.CapabilityArgs)
	}
}

func TestSetUpPodWithoutConfig(t *testing.T) {
	t.Parallel()
	m, fake := newFakeManager(t, false)
	_, err := m.SetUpPod(context.Background(), Pod{ID: "a", NetNS: "/run/netns/x"})
	if !errors.Is(err, ErrNoNetworkConfig) {
		t.Fatalf("SetUpPod = %v, want ErrNoNetworkConfig", err)
	}
	if n := len(fake.delCalls()); n != 0 {
		t.Errorf("%d DEL calls for a set-up that never started, want 0", n)
	}
}

func TestTearDownPodTargets(t *testing.T) {
	t.Parallel()
	cachedArgs := [][2]string{{"K8S_POD_NAME", "old-name"}}
	cachedCaps := map[string]interface{}{"portMappings": []interface{}{map[string]interface{}{"hostPort": 1.0}}}
	for _, tc := range []struct {
		desc        string
		withConfig  bool
		attachments []*libcni.NetworkAttachment
		wantNetwork []string
		wantArgs    [][2]string
	}{
		{
			desc:       "no cache, no config: nothing to do",
			withConfig: false,
		},
		{
			desc:        "no cache: the current default network",
			withConfig:  true,
			wantNetwork: []string{"net-a"},
		},
		{
			desc:       "cache wins over the current network, even when the config is gone",
			withConfig: false,
			attachments: []*libcni.NetworkAttachment{
				{ContainerID: "a", Network: "old-net", IfName: "eth0", Config: []byte(testConflistB), CniArgs: cachedArgs, CapabilityArgs: cachedCaps},
				{ContainerID: "a", Network: "cni-loopback", IfName: "lo", Config: []byte(`{"name":"cni-loopback","type":"loopback"}`)},
			},
			wantNetwork: []string{"net-b"},
			wantArgs:    cachedArgs,
		},
		{
			desc:       "unparsable cache of the current network falls back to the config",
			withConfig: true,
			attachments: []*libcni.NetworkAttachment{
				{ContainerID: "a", Network: "net-a", IfName: "eth0", Config: []byte("{bad")},
			},
			wantNetwork: []string{"net-a"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			m, fake := newFakeManager(t, tc.withConfig)
			fake.attachments = tc.attachments
			pod := Pod{ID: "a", Name: "new-name"} // netns gone
			if err := m.TearDownPod(context.Background(), pod); err != nil {
				t.Fatalf("TearDownPod = %v", err)
			}
			dels := fake.delCalls()
			var got []string
			for _, d := range dels {
				got = append(got, d.network)
				if d.rt.NetNS != "" {
					t.Errorf("DEL used netns %q, want the caller's empty one", d.rt.NetNS)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.wantNetwork, ",") {
				t.Fatalf("DEL networks = %v, want %v", got, tc.wantNetwork)
			}
			if tc.wantArgs != nil && len(dels) == 1 {
				if dels[0].rt.Args[0] != tc.wantArgs[0] {
					t.Errorf("DEL args = %v, want the cached %v", dels[0].rt.Args, tc.wantArgs)
				}
				if _, ok := dels[0].rt.CapabilityArgs["portMappings"]; !ok {
					t.Errorf("DEL capabilities = %v, want the cached ones", dels[0].rt.CapabilityArgs)
				}
			}
		})
	}
}

func TestPickVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc      string
		supported []string
		want      string
		wantErr   bool
	}{
		{desc: "preferred supported", supported: []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"}, want: "1.0.0"},
		{desc: "older plugin", supported: []string{"0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0"}, want: "0.4.0"},
		{desc: "unknown future versions skipped", supported: []string{"0.4.0", "9.0.0", "junk"}, want: "0.4.0"},
		{desc: "nothing usable", supported: []string{"junk"}, wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got, err := pickVersion(tc.supported, preferredLoopbackVersion)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("pickVersion = %q, %v; want %q (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
