package network

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"testing"
)

func TestCNIArgs(t *testing.T) {
	t.Parallel()
	got := cniArgs(Pod{ID: "abc123", Name: "web", Namespace: "prod", UID: "uid-1"})
	want := [][2]string{
		{"IgnoreUnknown", "1"},
		{"K8S_POD_NAMESPACE", "prod"},
		{"K8S_POD_NAME", "web"},
		{"K8S_POD_INFRA_CONTAINER_ID", "abc123"},
		{"K8S_POD_UID", "uid-1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cniArgs = %v, want %v", got, want)
	}
}

func TestCapabilityArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		pod  Pod
		want string // JSON of the capability map
	}{
		{
			desc: "nothing to pass",
			pod:  Pod{ID: "a"},
			want: `{}`,
		},
		{
			desc: "ports without a host port are not forwarded",
			pod:  Pod{ID: "a", PortMappings: []PortMapping{{ContainerPort: 80, Protocol: "tcp"}}},
			want: `{}`,
		},
		{
			desc: "port mappings keep host port, protocol (lowercase, tcp by default) and host IP",
			pod: Pod{ID: "a", PortMappings: []PortMapping{
				{HostPort: 8080, ContainerPort: 80, Protocol: "TCP", HostIP: "10.0.0.1"},
				{ContainerPort: 81},
				{HostPort: 5353, ContainerPort: 53, Protocol: "udp"},
				{HostPort: 9000, ContainerPort: 9000},
			}},
			want: `{"portMappings":[` +
				`{"hostPort":8080,"containerPort":80,"protocol":"tcp","hostIP":"10.0.0.1"},` +
				`{"hostPort":5353,"containerPort":53,"protocol":"udp"},` +
				`{"hostPort":9000,"containerPort":9000,"protocol":"tcp"}]}`,
		},
		{
			desc: "bandwidth with explicit bursts",
			pod:  Pod{ID: "a", Bandwidth: &Bandwidth{IngressRate: 1000000, IngressBurst: 20000, EgressRate: 2000000, EgressBurst: 40000}},
			want: `{"bandwidth":{"ingressRate":1000000,"ingressBurst":20000,"egressRate":2000000,"egressBurst":40000}}`,
		},
		{
			desc: "a rate without a burst gets an unlimited burst",
			pod:  Pod{ID: "a", Bandwidth: &Bandwidth{IngressRate: 1000000}},
			want: `{"bandwidth":{"ingressRate":1000000,"ingressBurst":2147483647,"egressRate":0,"egressBurst":0}}`,
		},
		{
			desc: "dns",
			pod:  Pod{ID: "a", DNS: &DNS{Servers: []string{"10.96.0.10"}, Searches: []string{"ns.svc.cluster.local"}, Options: []string{"ndots:5"}}},
			want: `{"dns":{"servers":["10.96.0.10"],"searches":["ns.svc.cluster.local"],"options":["ndots:5"]}}`,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			data, err := json.Marshal(capabilityArgs(tc.pod))
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != tc.want {
				t.Errorf("capabilities\n got %s\nwant %s", data, tc.want)
			}
		})
	}
}

func TestDefaultBurst(t *testing.T) {
	t.Parallel()
	if got := defaultBurst(0, 0); got != 0 {
		t.Errorf("no rate: burst %d, want 0", got)
	}
	if got := defaultBurst(5, 0); got != math.MaxInt32 {
		t.Errorf("rate without burst: %d, want MaxInt32", got)
	}
	if got := defaultBurst(5, 7); got != 7 {
		t.Errorf("explicit burst: %d, want 7", got)
	}
}

func TestPodValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc      string
		pod       Pod
		needNetNS bool
		wantErr   bool
	}{
		{desc: "complete", pod: Pod{ID: "a", Name: "n", Namespace: "ns", UID: "u", NetNS: "/proc/1/ns/net"}, needNetNS: true},
		{desc: "teardown without netns", pod: Pod{ID: "a"}},
		{desc: "no ID", pod: Pod{NetNS: "/x"}, wantErr: true},
		{desc: "setup without netns", pod: Pod{ID: "a"}, needNetNS: true, wantErr: true},
		{desc: "separator in a name", pod: Pod{ID: "a", Name: "x;y"}, wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			err := tc.pod.validate(tc.needNetNS)
			if (err != nil) != tc.wantErr {
				t.Fatalf("validate = %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidPod) {
				t.Errorf("error %v does not wrap ErrInvalidPod", err)
			}
		})
	}
}
