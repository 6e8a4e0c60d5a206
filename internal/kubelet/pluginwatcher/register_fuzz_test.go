package pluginwatcher

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// fuzzClient is a plugin's registration service: it answers GetInfo with
// info and keeps the statuses it is sent, after encoding them as gRPC would.
type fuzzClient struct {
	info     *registerapi.PluginInfo
	statuses []*registerapi.RegistrationStatus
}

func (c *fuzzClient) GetInfo(context.Context, *registerapi.InfoRequest, ...grpc.CallOption) (*registerapi.PluginInfo, error) {
	return c.info, nil
}

func (c *fuzzClient) NotifyRegistrationStatus(_ context.Context, in *registerapi.RegistrationStatus, _ ...grpc.CallOption) (*registerapi.RegistrationStatusResponse, error) {
	if _, err := proto.Marshal(in); err != nil {
		return nil, grpcstatus.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	c.statuses = append(c.statuses, in)
	return &registerapi.RegistrationStatusResponse{}, nil
}

// fuzzHandler refuses plugins with an empty version and fails to register
// those named "fail"; it records the endpoints it registers.
type fuzzHandler struct{ registered []string }

func (h *fuzzHandler) ValidatePlugin(_, _ string, versions []string) error {
	if len(versions) == 0 || slices.Contains(versions, "") {
		return errors.New("no usable version")
	}
	return nil
}

func (h *fuzzHandler) RegisterPlugin(_ context.Context, name, endpoint string, _ []string) error {
	if name == "fail" {
		return errors.New("driver did not answer")
	}
	h.registered = append(h.registered, endpoint)
	return nil
}

func (h *fuzzHandler) DeRegisterPlugin(string, string) {}

// FuzzRegisterPlugin: whatever a plugin answers GetInfo (and whatever its
// socket is called), registration ends without a panic, the plugin is told
// the outcome exactly once (the status always encodes), and it is
// remembered, under its socket and with its own endpoint or the socket,
// exactly when it was registered.
func FuzzRegisterPlugin(f *testing.F) {
	for _, seed := range []struct {
		info   *registerapi.PluginInfo
		socket string
	}{
		{&registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "csi.example.com", SupportedVersions: []string{"1.0.0"}}, "csi.example.com-reg.sock"},
		{&registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "hostpath.csi.k8s.io", Endpoint: "/var/lib/kubelet/plugins/csi-hostpath/csi.sock",
			SupportedVersions: []string{"1.0.0", "0.3.0"}}, "hostpath/registration.sock"},
		{&registerapi.PluginInfo{Type: registerapi.DevicePlugin, Name: "fail", SupportedVersions: []string{"v1beta1"}}, "dp.sock"},
		{&registerapi.PluginInfo{Type: "DRAPlugin", Name: "x"}, "dra.sock"},
		{&registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "x", SupportedVersions: []string{""}}, "x.sock"},
		{&registerapi.PluginInfo{}, ""},
	} {
		b, err := proto.Marshal(seed.info)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, seed.socket)
	}
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		info := &registerapi.PluginInfo{}
		if proto.Unmarshal(data, info) != nil || strings.ContainsRune(name, 0) {
			return // gRPC refuses the answer; no file name holds a NUL
		}
		h := &fuzzHandler{}
		w, err := New(Options{Dir: "/var/lib/kubelet/plugins_registry", Handlers: map[string]Handler{
			registerapi.CSIPlugin: h, registerapi.DevicePlugin: h,
		}})
		if err != nil {
			t.Fatal(err)
		}
		socket := w.dir + "/" + name
		c := &fuzzClient{info: info}
		err = w.registerWith(context.Background(), socket, c)
		if len(c.statuses) != 1 {
			t.Fatalf("plugin %v at %q told %d statuses (%v), want 1; error %v", info, socket, len(c.statuses), c.statuses, err)
		}
		if st := c.statuses[0]; st.PluginRegistered != (err == nil) || (err != nil) == (st.Error == "") {
			t.Fatalf("status %v for error %v", st, err)
		}
		r, ok := w.registered[socket]
		if err != nil {
			if ok || len(h.registered) > 0 {
				t.Fatalf("failed registration (%v) remembered: %+v %q", err, r, h.registered)
			}
			return
		}
		endpoint := info.Endpoint
		if endpoint == "" {
			endpoint = socket
		}
		if want := (registered{typ: info.Type, name: info.Name, endpoint: endpoint}); !ok || r != want || !slices.Equal(h.registered, []string{endpoint}) {
			t.Fatalf("registered %+v (handler %q), want %+v", r, h.registered, want)
		}
	})
}
