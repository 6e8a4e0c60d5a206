package pluginwatcher

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

type testRegistrar struct {
	registerapi.UnimplementedRegistrationServer
	info   *registerapi.PluginInfo
	status chan *registerapi.RegistrationStatus
}

func (r *testRegistrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return r.info, nil
}

func (r *testRegistrar) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.status <- s
	return &registerapi.RegistrationStatusResponse{}, nil
}

type testHandler struct {
	mu           sync.Mutex
	validateErr  error
	registered   []string
	deregistered []string
}

func (h *testHandler) ValidatePlugin(string, string, []string) error { return h.validateErr }

func (h *testHandler) RegisterPlugin(_ context.Context, name, endpoint string, _ []string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.registered = append(h.registered, name+"@"+endpoint)
	return nil
}

func (h *testHandler) DeRegisterPlugin(name, _ string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.deregistered = append(h.deregistered, name)
}

func (h *testHandler) snapshot() ([]string, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.registered...), append([]string(nil), h.deregistered...)
}

func status(t *testing.T, r *testRegistrar) *registerapi.RegistrationStatus {
	t.Helper()
	select {
	case s := <-r.status:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no registration status within 10s")
	}
	return nil
}

// TestWatcher: a socket whose server listens only a moment after it
// appeared (connections refused meanwhile) is registered all the same; an unknown type and a
// failed validation are told to the plugin with upstream's messages; a
// removed socket deregisters its plugin.
func TestWatcher(t *testing.T) {
	dir, err := os.MkdirTemp("", "pw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	good, bad := &testHandler{}, &testHandler{validateErr: errors.New("too old")}
	w, err := New(Options{Dir: dir, Handlers: map[string]Handler{"Good": good, "Bad": bad}, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	serve := func(name string, info *registerapi.PluginInfo, delay time.Duration) *testRegistrar {
		r := &testRegistrar{info: info, status: make(chan *registerapi.RegistrationStatus, 1)}
		// The socket file appears at bind(); connections are refused until
		// listen(), delay later.
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Bind(fd, &unix.SockaddrUnix{Name: filepath.Join(dir, name)}); err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		registerapi.RegisterRegistrationServer(srv, r)
		t.Cleanup(srv.Stop)
		go func() {
			time.Sleep(delay)
			if err := unix.Listen(fd, 16); err != nil {
				t.Error(err)
				return
			}
			f := os.NewFile(uintptr(fd), name)
			l, err := net.FileListener(f)
			_ = f.Close()
			if err != nil {
				t.Error(err)
				return
			}
			_ = srv.Serve(l)
		}()
		return r
	}
	r := serve("good.sock", &registerapi.PluginInfo{Type: "Good", Name: "g", Endpoint: "/x/g.sock", SupportedVersions: []string{"1"}}, 300*time.Millisecond)
	if s := status(t, r); !s.PluginRegistered {
		t.Errorf("good plugin: %+v", s)
	}
	r = serve("unknown.sock", &registerapi.PluginInfo{Type: "Other", Name: "o"}, 0)
	if s := status(t, r); s.PluginRegistered || !strings.HasPrefix(s.Error, "RegisterPlugin error -- no handler registered for plugin type: Other at socket ") {
		t.Errorf("unknown type: %+v", s)
	}
	r = serve("bad.sock", &registerapi.PluginInfo{Type: "Bad", Name: "b"}, 0)
	if s := status(t, r); s.PluginRegistered || s.Error != "RegisterPlugin error -- plugin validation failed with err: too old" {
		t.Errorf("failed validation: %+v", s)
	}
	if reg, _ := good.snapshot(); len(reg) != 1 || reg[0] != "g@/x/g.sock" {
		t.Errorf("registered %v", reg)
	}
	if err := os.Remove(filepath.Join(dir, "good.sock")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, dereg := good.snapshot(); len(dereg) == 1 && dereg[0] == "g" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the removed socket's plugin was not deregistered")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStatusForNonUTF8SocketName: a plugin whose socket name is not UTF-8 is
// still told why it was refused (protobuf does not encode a string that is
// not UTF-8, so quoting the name as is lost the status).
func TestStatusForNonUTF8SocketName(t *testing.T) {
	dir, err := os.MkdirTemp("", "pw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, "plugin-\xff.sock"))
	if err != nil {
		t.Fatal(err)
	}
	r := &testRegistrar{info: &registerapi.PluginInfo{Type: "Other", Name: "o"}, status: make(chan *registerapi.RegistrationStatus, 1)}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, r)
	t.Cleanup(srv.Stop)
	go func() { _ = srv.Serve(l) }()

	// No test logger: the registration goroutine logs the refusal after
	// the status is sent, possibly once the test has ended.
	w, err := New(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	want := "RegisterPlugin error -- no handler registered for plugin type: Other at socket " + filepath.Join(dir, "plugin-\uFFFD.sock")
	if s := status(t, r); s.PluginRegistered || s.Error != want {
		t.Errorf("status %+v, want the error %q", s, want)
	}
}
