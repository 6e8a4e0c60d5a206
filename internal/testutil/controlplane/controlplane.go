// Package controlplane starts and stops the real loopback control plane of
// scripts/controlplane.sh (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) for tests, on free ports so that several can run side by
// side, plus what tests do with it: one control plane per test package
// (Shared), node credentials signed by the cluster CA (NodeClient) and Node
// objects removed when the test ends (CreateNode). It is test support: only
// _test.go files (and other internal/testutil packages) may import it.
package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/cmdtest"
)

// Cluster is a running control plane.
type Cluster struct {
	// Dir is the state dir (pki/, logs/, admin.conf, ...).
	Dir string
	// APIServer is the https URL of the kube-apiserver.
	APIServer string
	// AdminKubeconfig has system:masters credentials.
	AdminKubeconfig string
	// BootstrapKubeconfig carries a bootstrap token (kubeadm's RBAC applies).
	BootstrapKubeconfig string
	// CAFile is the cluster CA certificate (PEM).
	CAFile string
	// CAKeyFile is the cluster CA key (PEM), for tests that sign certificates.
	CAKeyFile string
	// Kubectl is the kubectl binary matching the API server.
	Kubectl string
	// Client is an admin clientset.
	Client kubernetes.Interface

	script string
	env    []string
}

// Script returns the path of scripts/controlplane.sh in this checkout.
func Script() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("controlplane: cannot locate the source tree")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	path := filepath.Join(root, "scripts", "controlplane.sh")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("controlplane: %w", err)
	}
	return path, nil
}

// UpstreamBinary returns the path of one of the upstream v1.37 binaries that
// scripts/build-controlplane.sh builds and caches (e.g. "upstream-kubelet"),
// building them first when missing.
func UpstreamBinary(ctx context.Context, name string) (string, error) {
	script, err := Script()
	if err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, "bash", filepath.Join(filepath.Dir(script), "build-controlplane.sh")).Output()
	if err != nil {
		return "", fmt.Errorf("build-controlplane.sh: %w", err)
	}
	lines := strings.Fields(strings.TrimSpace(string(out)))
	if len(lines) == 0 {
		return "", errors.New("build-controlplane.sh printed no directory")
	}
	bin := filepath.Join(lines[len(lines)-1], name)
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("controlplane: %w", err)
	}
	return bin, nil
}

// Start brings a control plane up in dir (created if missing) on free loopback
// ports. It fails when the binaries are missing and cannot be built. The caller
// must Stop it.
func Start(ctx context.Context, dir string) (*Cluster, error) {
	script, err := Script()
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	env := []string{
		"KDS_APISERVER_PORT=" + strconv.Itoa(ports[0]),
		"KDS_ETCD_PORT=" + strconv.Itoa(ports[1]),
		"KDS_ETCD_PEER_PORT=" + strconv.Itoa(ports[2]),
		"KDS_CM_PORT=" + strconv.Itoa(ports[3]),
		"KDS_SCHEDULER_PORT=" + strconv.Itoa(ports[4]),
	}
	c := &Cluster{Dir: dir, script: script, env: env}
	if _, err := c.run(ctx, "up"); err != nil {
		_ = c.Stop()
		return nil, err
	}
	out, err := c.run(ctx, "env")
	if err != nil {
		_ = c.Stop()
		return nil, err
	}
	vars := parseEnv(out)
	c.APIServer = vars["KDS_APISERVER"]
	c.AdminKubeconfig = vars["KUBECONFIG"]
	c.BootstrapKubeconfig = vars["KDS_BOOTSTRAP_KUBECONFIG"]
	c.Kubectl = vars["KDS_KUBECTL"]
	c.CAFile = vars["KDS_CA"]
	c.CAKeyFile = filepath.Join(dir, "pki", "ca.key")
	cfg, err := clientcmd.BuildConfigFromFlags("", c.AdminKubeconfig)
	if err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("controlplane: admin kubeconfig: %w", err)
	}
	if c.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("controlplane: admin client: %w", err)
	}
	return c, nil
}

// Stop stops every component this cluster started (by PID). The state dir is
// left for the caller to remove.
func (c *Cluster) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.run(ctx, "down")
	return err
}

// StopAPIServer stops the kube-apiserver only, by the PID the script
// recorded, and waits until it has exited: SIGTERM, then SIGKILL after 5 s
// (its graceful shutdown waits up to a minute for open watches).
func (c *Cluster) StopAPIServer(ctx context.Context) error {
	pidFile := filepath.Join(c.Dir, "pids", "kube-apiserver.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("controlplane: bad pid in %s: %w", pidFile, err)
	}
	if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); filepath.Base(exe) != "kube-apiserver" {
		return fmt.Errorf("controlplane: pid %d is not our kube-apiserver", pid)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("controlplane: stop kube-apiserver: %w", err)
	}
	killAt := time.Now().Add(5 * time.Second)
	for {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if filepath.Base(exe) != "kube-apiserver" {
			return nil
		}
		if time.Now().After(killAt) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("controlplane: kube-apiserver (pid %d) did not stop: %w", pid, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// StartAPIServer starts whatever component is not running (after StopAPIServer:
// the kube-apiserver) with the same state and ports, and waits until ready.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	_, err := c.run(ctx, "up")
	return err
}

// KubectlCmd returns a kubectl command with the admin kubeconfig.
func (c *Cluster) KubectlCmd(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, c.Kubectl, append([]string{"--kubeconfig", c.AdminKubeconfig}, args...)...)
}

// Kubectl runs kubectl with the admin kubeconfig and returns its stdout; on
// failure the error carries stderr.
func (c *Cluster) KubectlRun(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := c.KubectlCmd(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// LogTail returns the last n lines of a component's log (for failure messages).
func (c *Cluster) LogTail(component string, n int) string {
	b, err := os.ReadFile(filepath.Join(c.Dir, "logs", component+".log"))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (c *Cluster) run(ctx context.Context, verb string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", c.script, verb, c.Dir)
	cmd.Env = append(os.Environ(), c.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("controlplane.sh %s: %w\n%s", verb, err, cmdtest.LastLines(stderr.String(), 30))
	}
	return stdout.String(), nil
}

// parseEnv reads NAME=VALUE lines (values as printed by printf %q: plain paths).
func parseEnv(out string) map[string]string {
	vars := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		name, value, ok := strings.Cut(strings.TrimSpace(line), "=")
		if ok {
			vars[name] = strings.Trim(value, "'")
		}
	}
	return vars
}

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("controlplane: free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
