//go:build linux

package dockershim_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/server"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/dockerd"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/fstest"
)

// Images the integration tests use; scripts/build-images.sh builds them locally.
const (
	pauseImage   = "registry.k8s.io/pause:3.10"
	busyboxImage = "kubelet-dockershim/busybox:latest"
	testLabel    = "io.kubelet-dockershim.test"
)

// TestMain runs the package's tests against the host's dockerd, or a private
// daemon of the engine $DOCKERSHIM_TEST_DOCKER names (dockerd.RunMain).
func TestMain(m *testing.M) { os.Exit(dockerd.RunMain(m, pauseImage, busyboxImage)) }

// shim is one running dockershim with its gRPC server, on private temp dirs.
type shim struct {
	t        testing.TB
	svc      *dockershim.Service
	srv      *server.Server
	rt       runtimeapi.RuntimeServiceClient
	img      runtimeapi.ImageServiceClient
	conn     *grpc.ClientConn
	env      *shimEnv
	cancel   context.CancelFunc
	endpoint string
}

// shimEnv holds the directories and network a test shares across shim restarts.
type shimEnv struct {
	root, cniConf, cniCache, ipamDir, logDir string
	bridge, subnetPrefix                     string
	runID                                    string
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// requireHost fails (never skips) when Docker, the CNI plugins or the images are missing.
func requireHost(t testing.TB) {
	t.Helper()
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Fatalf("dockerd is required (scripts/prepare-host.sh starts it): %v: %s", err, out)
	}
	for _, img := range []string{pauseImage, busyboxImage} {
		if out, err := exec.Command("docker", "image", "inspect", img).CombinedOutput(); err != nil {
			t.Fatalf("image %s is required (scripts/build-images.sh builds it): %v: %s", img, err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(cniBinDir(), "bridge")); err != nil {
		t.Fatalf("CNI plugins are required in %s: %v", cniBinDir(), err)
	}
}

func cniBinDir() string {
	if d := os.Getenv("DOCKERSHIM_TEST_CNI_BIN_DIR"); d != "" {
		return d
	}
	return "/usr/lib/cni"
}

// newEnv makes temp dirs and a unique bridge/subnet; withConf writes the CNI conflist.
func newEnv(t testing.TB, withConf bool) *shimEnv {
	t.Helper()
	requireHost(t)
	base, err := os.MkdirTemp("", "dsit")
	if err != nil {
		t.Fatal(err)
	}
	id := randHex(3)
	e := &shimEnv{
		root: filepath.Join(base, "root"), cniConf: filepath.Join(base, "net.d"), cniCache: filepath.Join(base, "cache"),
		ipamDir: filepath.Join(base, "ipam"), logDir: filepath.Join(base, "logs"),
		bridge: "dst" + id, subnetPrefix: fmt.Sprintf("10.%d.%d", 200+int(id[0])%50, int(id[1])), runID: id,
	}
	for _, d := range []string{e.root, e.cniConf, e.cniCache, e.ipamDir, e.logDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if withConf {
		e.writeConf(t, "")
	}
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", e.bridge).Run()
		// The shim's netns pins outlive it (the tests remove sandboxes
		// through Docker): unmount them, or base cannot be removed.
		if err := fstest.UnmountUnder(base); err != nil {
			t.Log(err)
		}
		_ = os.RemoveAll(base)
	})
	return e
}

// writeConf writes the bridge+host-local+portmap conflist; extra is appended as a
// further plugin (to make ADD fail on purpose).
func (e *shimEnv) writeConf(t testing.TB, extra string) {
	t.Helper()
	plugins := fmt.Sprintf(`{"type":"bridge","bridge":%q,"isGateway":true,"ipMasq":false,
	  "ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"%s.0/24"}]]}},
	  {"type":"portmap","capabilities":{"portMappings":true}}`, e.bridge, e.ipamDir, e.subnetPrefix)
	if extra != "" {
		plugins += "," + extra
	}
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"dstest","plugins":[%s]}`, plugins)
	if err := os.WriteFile(filepath.Join(e.cniConf, "10-test.conflist"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
}

// reservedIPs lists the IPs host-local holds for the test network.
func (e *shimEnv) reservedIPs(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(e.ipamDir, "dstest"))
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		t.Fatal(err)
	}
	var ips []string
	for _, en := range entries {
		if strings.HasPrefix(en.Name(), e.subnetPrefix+".") {
			ips = append(ips, en.Name())
		}
	}
	return ips
}

// startShim starts the service and its gRPC server on a temp socket, and a client.
func startShim(t testing.TB, e *shimEnv) *shim {
	t.Helper()
	return startShimOn(t, e, dockerd.Endpoint())
}

// startShimOn is startShim on the dockerd at endpoint.
func startShimOn(t testing.TB, e *shimEnv, endpoint string) *shim {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logger := zaptest.NewLogger(t)
	svc, err := dockershim.New(dockershim.Options{
		DockerEndpoint: endpoint, RootDirectory: e.root, PodInfraImage: pauseImage,
		CNIConfDir: e.cniConf, CNIBinDirs: []string{cniBinDir()}, CNICacheDir: e.cniCache, Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	if err := svc.Start(sctx); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(filepath.Dir(e.root), "cri.sock")
	srv, err := server.Start(ctx, server.Options{
		Endpoint: "unix://" + sock, Runtime: svc, Image: svc, Logger: logger,
		UnaryInterceptors:  []grpc.UnaryServerInterceptor{dockershim.EdgeInterceptor()},
		StreamInterceptors: []grpc.StreamServerInterceptor{dockershim.StreamEdgeInterceptor()},
	})
	if err != nil {
		t.Fatal(err)
	}
	<-srv.Ready()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	s := &shim{t: t, svc: svc, srv: srv, conn: conn, env: e, cancel: cancel, endpoint: "unix://" + sock,
		rt: runtimeapi.NewRuntimeServiceClient(conn), img: runtimeapi.NewImageServiceClient(conn)}
	t.Cleanup(s.stop)
	return s
}

// stop closes the client, server and service (idempotent). Containers stay in Docker.
func (s *shim) stop() {
	if s.cancel == nil {
		return
	}
	_ = s.conn.Close()
	_ = s.srv.Close()
	_ = s.svc.Close()
	s.cancel()
	s.cancel = nil
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// sandboxConfig is a minimal pod config labelled for cleanup.
func (s *shim) sandboxConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "it-" + s.env.runID, Uid: name + "-" + randHex(4)},
		Hostname:     name,
		LogDirectory: filepath.Join(s.env.logDir, name),
		Labels:       map[string]string{testLabel: s.env.runID},
		Annotations:  map[string]string{"note": "integration"},
		Linux:        &runtimeapi.LinuxPodSandboxConfig{},
	}
}

// runSandbox runs a sandbox and removes it at cleanup.
func (s *shim) runSandbox(cfg *runtimeapi.PodSandboxConfig) string {
	s.t.Helper()
	resp, err := s.rt.RunPodSandbox(ctxT(s.t), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		s.t.Fatalf("RunPodSandbox: %v", err)
	}
	id := resp.PodSandboxId
	s.t.Cleanup(func() { removeSandboxDirect(id) })
	return id
}

// removeSandboxDirect removes a test sandbox's containers through Docker by label.
func removeSandboxDirect(id string) {
	out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=io.kubernetes.sandbox.id="+id).Output()
	for _, c := range strings.Fields(string(out)) {
		_ = exec.Command("docker", "rm", "-f", c).Run()
	}
	_ = exec.Command("docker", "rm", "-f", id).Run()
}

// containerConfig is a busybox container running cmd.
func containerConfig(name string, cmd ...string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: busyboxImage},
		Command:  cmd,
		LogPath:  name + ".log",
		Labels:   map[string]string{"container": name},
	}
}

// createStart creates and starts a container.
func (s *shim) createStart(sbID string, sbCfg *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig) string {
	s.t.Helper()
	ctx := ctxT(s.t)
	c, err := s.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sbID, Config: cfg, SandboxConfig: sbCfg})
	if err != nil {
		s.t.Fatalf("CreateContainer: %v", err)
	}
	if _, err := s.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		s.t.Fatalf("StartContainer: %v", err)
	}
	return c.ContainerId
}

// waitState polls ContainerStatus until the state is reached (bounded).
func (s *shim) waitState(id string, want runtimeapi.ContainerState) *runtimeapi.ContainerStatus {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := s.rt.ContainerStatus(ctxT(s.t), &runtimeapi.ContainerStatusRequest{ContainerId: id})
		if err != nil {
			s.t.Fatalf("ContainerStatus: %v", err)
		}
		if st.Status.State == want {
			return st.Status
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("container %s: state %v, want %v", id, st.Status.State, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func readFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	return string(b), err
}

func writeFile(p, v string) error { return os.WriteFile(p, []byte(v), 0) }
