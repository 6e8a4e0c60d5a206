//go:build linux

package kubelet

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/cri"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/dns"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/pleg"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podsource"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/prober"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/runtimehelper"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/runtimestate"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/status"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes"
	"github.com/kubelet-dockershim/kubelet/internal/kuberuntime"
)

// startShim builds the binary and runs it in shim-only mode with a private
// bridge network; it returns the CRI endpoint. The shim is stopped at cleanup.
func startShim(t *testing.T, dir, suffix string) string {
	t.Helper()
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		t.Fatalf("dockerd is required: %v: %s", err, out)
	}
	bin := filepath.Join(dir, "kubelet-bin")
	if out, err := exec.Command("go", "build", "-o", bin, "../..").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	netd := filepath.Join(dir, "net.d")
	if err := os.MkdirAll(netd, 0o755); err != nil {
		t.Fatal(err)
	}
	subnet := fmt.Sprintf("10.%d.%d.0/24", 230+int(suffix[0])%10, int(suffix[1]))
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"klt-%s","plugins":[{"type":"bridge","bridge":"klt%s","isGateway":true,"ipMasq":false,"ipam":{"type":"host-local","ranges":[[{"subnet":"%s"}]],"dataDir":"%s"}},{"type":"portmap","capabilities":{"portMappings":true}}]}`,
		suffix, suffix, subnet, filepath.Join(dir, "ipam"))
	if err := os.WriteFile(filepath.Join(netd, "10-klt.conflist"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "cri.sock")
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "--experimental-dockershim", "--container-runtime-endpoint=unix://"+sock,
		"--experimental-dockershim-root-directory="+filepath.Join(dir, "shimroot"), "--cni-conf-dir="+netd,
		"--cni-bin-dir=/usr/lib/cni", "--cni-cache-dir="+filepath.Join(dir, "cache"))
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
		}
		_ = exec.Command("ip", "link", "delete", "klt"+suffix).Run()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return "unix://" + sock
		}
		if time.Now().After(deadline) {
			t.Fatalf("shim socket did not appear:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// namespaceRuntime shows the kubelet only the sandboxes and containers of one
// namespace: the shim lists everything in the shared dockerd, and the kubelet
// must not kill or collect the pods of other tests as orphans.
type namespaceRuntime struct {
	internalapi.RuntimeService
	ns string
}

func (r namespaceRuntime) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	if f == nil {
		f = &runtimeapi.PodSandboxFilter{}
	}
	f.LabelSelector = withNamespace(f.LabelSelector, r.ns)
	return r.RuntimeService.ListPodSandbox(ctx, f)
}

func (r namespaceRuntime) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	if f == nil {
		f = &runtimeapi.ContainerFilter{}
	}
	f.LabelSelector = withNamespace(f.LabelSelector, r.ns)
	return r.RuntimeService.ListContainers(ctx, f)
}

func withNamespace(sel map[string]string, ns string) map[string]string {
	out := map[string]string{"io.kubernetes.pod.namespace": ns}
	for k, v := range sel {
		out[k] = v
	}
	return out
}

type integrationKubelet struct {
	k        *Kubelet
	rt       internalapi.RuntimeService
	root     string
	manifest string
	node     string
}

func wireKubelet(t *testing.T, ctx context.Context, dir, endpoint, node, ns string) *integrationKubelet {
	t.Helper()
	logger := zaptest.NewLogger(t)
	shared, err := cri.NewRuntimeService(ctx, cri.Options{Endpoint: endpoint, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	rt := namespaceRuntime{RuntimeService: shared, ns: ns}
	img, err := cri.NewImageService(ctx, cri.Options{Endpoint: endpoint, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ik := &integrationKubelet{rt: rt, root: filepath.Join(dir, "kubelet"), manifest: filepath.Join(dir, "manifests"), node: node}
	if err := os.MkdirAll(ik.manifest, 0o755); err != nil {
		t.Fatal(err)
	}
	st := status.NewManager(status.Options{Logger: logger})
	results := prober.NewResults()
	machine, err := resources.ReadMachine(ik.root)
	if err != nil {
		t.Fatal(err)
	}
	helper, err := runtimehelper.New(runtimehelper.Options{RootDir: ik.root, NodeIP: []byte{127, 0, 0, 1}, Logger: logger,
		DNS: dns.NewConfigurer(dns.Options{ClusterDomain: "cluster.local", ResolvConf: "/etc/resolv.conf"})})
	if err != nil {
		t.Fatal(err)
	}
	krt, err := kuberuntime.New(kuberuntime.Options{Runtime: rt, Images: img, Helper: helper, Logger: logger,
		ProbeResults: results, PodLogsDir: filepath.Join(dir, "logs"), RuntimeName: "docker",
		SerializeImagePulls: true, CPUCFSQuota: true, MachineMemoryBytes: machine.MemoryCapacity})
	if err != nil {
		t.Fatal(err)
	}
	state, err := runtimestate.New(runtimestate.Options{Runtime: krt, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	cache := kubecontainer.NewCache()
	vols, err := volumes.New(volumes.Options{PodsDir: filepath.Join(ik.root, "pods"), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	src, err := podsource.New(podsource.Options{NodeName: node, ManifestPath: ik.manifest, FileCheckFrequency: time.Second, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	relist, err := pleg.NewGeneric(pleg.Options{Runtime: krt, Cache: cache, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{
		Parts: Parts{
			Runtime: krt, Streaming: krt, Helper: helper, State: state, Sources: src, Status: st, Volumes: vols,
			Prober: prober.NewManager(prober.Options{Runner: krt, Results: results, Status: st, Logger: logger}),
			Cache:  cache, PLEG: relist,
		},
		Config: Config{NodeIP: []byte{127, 0, 0, 1}, HousekeepingInterval: 200 * time.Millisecond, ResyncInterval: 2 * time.Second},
		Logger: logger,
	}
	if ik.k, err = New(opts); err != nil {
		t.Fatal(err)
	}
	for _, c := range []interface{ Start(context.Context) error }{src, state, krt} {
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return ik
}

func (ik *integrationKubelet) pod(name string) (v1.Pod, bool) {
	for _, p := range ik.k.Pods() {
		if p.Name == name+"-"+ik.node {
			return p, true
		}
	}
	return v1.Pod{}, false
}

func (ik *integrationKubelet) waitPod(t *testing.T, name, what string, cond func(v1.Pod) bool) v1.Pod {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		p, ok := ik.pod(name)
		if ok && cond(p) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s: timed out waiting for %s; last status %+v", name, what, p.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (ik *integrationKubelet) runningContainers(t *testing.T, uid string) int {
	t.Helper()
	cs, err := ik.rt.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid}})
	if err != nil {
		t.Fatal(err)
	}
	return len(cs)
}

// removeNamespace stops and removes every sandbox (and so container) the test
// created, by its namespace label.
func removeNamespace(rt internalapi.RuntimeService, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.namespace": ns}})
	if err != nil {
		return
	}
	for _, sb := range sbs {
		_ = rt.StopPodSandbox(ctx, sb.Id)
		_ = rt.RemovePodSandbox(ctx, sb.Id)
	}
}

const webManifest = `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: NS}
spec:
  terminationGracePeriodSeconds: 2
  subdomain: sub
  containers:
  - name: main
    image: kubelet-dockershim/busybox:latest
    imagePullPolicy: Never
    command: ["sh", "-c", "cat /etc/hosts > /data/hosts; echo \"$POD_NAME $POD_IP $MEM_MI $GREETING\" > /data/info.tmp; mv /data/info.tmp /data/info; exec sleep 3600"]
    env:
    - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
    - {name: MEM_MI, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}}
    - {name: GREETING, value: "hello-$(POD_NAME)"}
    resources: {limits: {memory: 64Mi}}
    readinessProbe:
      exec: {command: ["cat", "/data/info"]}
      periodSeconds: 1
    volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, emptyDir: {}}]
`

const jobManifest = `apiVersion: v1
kind: Pod
metadata: {name: job, namespace: NS}
spec:
  restartPolicy: Never
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: kubelet-dockershim/busybox:latest
    imagePullPolicy: Never
    command: ["sh", "-c", "echo finished > /dev/termination-log; exit 3"]
`

const stayManifest = `apiVersion: v1
kind: Pod
metadata: {name: stay, namespace: NS}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: kubelet-dockershim/busybox:latest
    imagePullPolicy: Never
    command: ["sleep", "3600"]
`

// TestIntegrationKubeletRunsStaticPods runs the kubelet with every real part
// against a shim-only dockershim: static pods from manifest files start with
// their environment, volume, hosts file and readiness probe; a finished pod
// reports its exit code and termination message; a removed manifest kills its
// pod and removes its directory; and stopping the kubelet leaves the pods
// running.
func TestIntegrationKubeletRunsStaticPods(t *testing.T) {
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	suffix := hex.EncodeToString(rnd[:])
	dir, err := os.MkdirTemp("", "klt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	endpoint := startShim(t, dir, suffix)
	ns := "klt-" + suffix
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ik := wireKubelet(t, ctx, dir, endpoint, "node-"+suffix, ns)
	t.Cleanup(func() { removeNamespace(ik.rt, ns) })
	done := make(chan error, 1)
	go func() { done <- ik.k.Run(ctx) }()

	for name, m := range map[string]string{"web": webManifest, "job": jobManifest, "stay": stayManifest} {
		if err := os.WriteFile(filepath.Join(ik.manifest, name+".yaml"), []byte(strings.ReplaceAll(m, "NS", ns)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	web := ik.waitPod(t, "web", "Ready", func(p v1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
				return true
			}
		}
		return false
	})
	checkWeb(t, ik, web)

	job := ik.waitPod(t, "job", "Failed", func(p v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	term := job.Status.ContainerStatuses[0].State.Terminated
	if term == nil || term.ExitCode != 3 || strings.TrimSpace(term.Message) != "finished" {
		t.Errorf("job container = %+v, want exit 3 with message \"finished\"", job.Status.ContainerStatuses[0].State)
	}
	stay := ik.waitPod(t, "stay", "Running", func(p v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	if stay.Status.PodIP != "127.0.0.1" {
		t.Errorf("host-network pod IP = %q, want the node IP", stay.Status.PodIP)
	}

	if err := os.Remove(filepath.Join(ik.manifest, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	podDir := filepath.Join(ik.root, "pods", string(web.UID))
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, statErr := os.Stat(podDir)
		_, listed := ik.pod("web")
		if !listed && os.IsNotExist(statErr) && ik.runningContainers(t, string(web.UID)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("removed pod not cleaned up: listed %v, dir %v, running %d", listed, statErr, ik.runningContainers(t, string(web.UID)))
		}
		time.Sleep(100 * time.Millisecond)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
	time.Sleep(500 * time.Millisecond)
	if n := ik.runningContainers(t, string(stay.UID)); n != 1 {
		t.Errorf("after the kubelet stopped, %d containers of the running pod run, want 1", n)
	}
}

func checkWeb(t *testing.T, ik *integrationKubelet, web v1.Pod) {
	t.Helper()
	if web.Status.Phase != v1.PodRunning || web.Status.PodIP == "" || !strings.HasPrefix(web.Status.PodIP, "10.") ||
		web.Status.HostIP != "127.0.0.1" {
		t.Errorf("web status = %+v", web.Status)
	}
	c := web.Status.ContainerStatuses[0]
	if !c.Ready || c.Started == nil || !*c.Started || !strings.HasPrefix(c.ContainerID, "docker://") || c.ImageID == "" {
		t.Errorf("web container status = %+v", c)
	}
	data := filepath.Join(ik.root, "pods", string(web.UID), "volumes", volumes.EmptyDirPluginDir, "data")
	info, err := os.ReadFile(filepath.Join(data, "info"))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%s %s 64 hello-%s", web.Name, web.Status.PodIP, web.Name)
	if strings.TrimSpace(string(info)) != want {
		t.Errorf("container environment = %q, want %q", strings.TrimSpace(string(info)), want)
	}
	hosts, err := os.ReadFile(filepath.Join(data, "hosts"))
	if err != nil {
		t.Fatal(err)
	}
	wantLine := fmt.Sprintf("%s\tweb-%s.sub.%s.svc.cluster.local\tweb-%s", web.Status.PodIP, ik.node, web.Namespace, ik.node)
	if !strings.Contains(string(hosts), wantLine) {
		t.Errorf("container /etc/hosts lacks %q:\n%s", wantLine, hosts)
	}
}
