//go:build linux

package dockershim_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// execOut runs a command in a container and returns trimmed stdout.
func (s *shim) execOut(id string, cmd ...string) string {
	s.t.Helper()
	r, err := s.rt.ExecSync(ctxT(s.t), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: 10})
	if err != nil {
		s.t.Fatalf("exec %v: %v", cmd, err)
	}
	return strings.TrimSpace(string(r.Stdout))
}

// TestIntegrationSecurityAndNamespaces checks that the security context, namespace
// modes, sysctls, hostname and the OOM score clamp reach the container.
func TestIntegrationSecurityAndNamespaces(t *testing.T) {
	e := newEnv(t, true)
	s := startShim(t, e)
	sbCfg := s.sandboxConfig("secctx")
	sbCfg.Hostname = "secctx-host"
	sbCfg.Linux.Sysctls = map[string]string{"net.ipv4.ip_unprivileged_port_start": "80"}
	sbCfg.Linux.SecurityContext = &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_POD}}
	sbID := s.runSandbox(sbCfg)

	cfg := containerConfig("restricted", "sleep", "300")
	cfg.Linux = &runtimeapi.LinuxContainerConfig{
		Resources: &runtimeapi.LinuxContainerResources{OomScoreAdj: -997, CpuShares: 256},
		SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
			RunAsUser:          &runtimeapi.Int64Value{Value: 1000},
			RunAsGroup:         &runtimeapi.Int64Value{Value: 1000},
			SupplementalGroups: []int64{2000},
			ReadonlyRootfs:     true,
			NoNewPrivs:         true,
			Capabilities:       &runtimeapi.Capability{DropCapabilities: []string{"ALL"}},
			NamespaceOptions:   &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_POD},
			Seccomp:            &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
		},
	}
	id := s.createStart(sbID, sbCfg, cfg)
	s.waitState(id, runtimeapi.ContainerState_CONTAINER_RUNNING)

	for _, c := range []struct {
		desc string
		cmd  []string
		want string
	}{
		{"uid", []string{"id", "-u"}, "1000"},
		{"gid", []string{"id", "-g"}, "1000"},
		{"supplemental group", []string{"sh", "-c", "id -G | tr ' ' '\\n' | grep -x 2000"}, "2000"},
		{"hostname", []string{"hostname"}, "secctx-host"},
		{"sysctl", []string{"cat", "/proc/sys/net/ipv4/ip_unprivileged_port_start"}, "80"},
		{"no caps", []string{"sh", "-c", "grep CapEff /proc/self/status | tr -d '\\t'"}, "CapEff:0000000000000000"},
		{"no_new_privs", []string{"sh", "-c", "grep NoNewPrivs /proc/self/status | tr -d '\\t'"}, "NoNewPrivs:1"},
		{"oom score clamped, not refused", []string{"cat", "/proc/self/oom_score_adj"}, clampedOOM()},
		{"pid namespace shared with pause", []string{"sh", "-c", "cat /proc/1/cmdline | tr -d '\\0'"}, "/pause"},
	} {
		if got := s.execOut(id, c.cmd...); got != c.want {
			t.Errorf("%s: %q, want %q", c.desc, got, c.want)
		}
	}
	r, err := s.rt.ExecSync(ctxT(t), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"touch", "/x"}, Timeout: 10})
	if err != nil || r.ExitCode == 0 {
		t.Errorf("write to read-only rootfs: exit %d, %v", r.GetExitCode(), err)
	}
}

// clampedOOM is what a container asking for -997 gets: -997 where the host allows
// negative scores, else the shim's own floor (this process's score).
func clampedOOM() string {
	b, err := readFile("/proc/self/oom_score_adj")
	if err != nil {
		return "?"
	}
	own := strings.TrimSpace(b)
	if err := writeFile("/proc/self/oom_score_adj", "-1"); err != nil {
		return own
	}
	_ = writeFile("/proc/self/oom_score_adj", own)
	return "-997"
}

// TestIntegrationHostPort reaches a pod's server through the CNI portmap hostPort, on
// the test bridge's own gateway address.
func TestIntegrationHostPort(t *testing.T) {
	e := newEnv(t, true)
	s := startShim(t, e)
	sbCfg := s.sandboxConfig("hostport")
	port := freePort(t)
	sbCfg.PortMappings = []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 8080, HostPort: int32(port), HostIp: e.subnetPrefix + ".1"}}
	sbID := s.runSandbox(sbCfg)
	id := s.createStart(sbID, sbCfg, containerConfig("web", "sh", "-c", "mkdir -p /tmp/www && echo hello-hostport > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"))
	s.waitState(id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	url := fmt.Sprintf("http://%s:%d/index.html", e.subnetPrefix+".1", port)
	var body string
	waitFor(t, func() bool {
		c := http.Client{Timeout: time.Second}
		resp, err := c.Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == 200
	})
	if strings.TrimSpace(body) != "hello-hostport" {
		t.Fatalf("body %q", body)
	}
	if _, err := s.rt.StopPodSandbox(ctxT(t), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sbID}); err != nil {
		t.Fatal(err)
	}
	c := http.Client{Timeout: time.Second}
	if resp, err := c.Get(url); err == nil {
		resp.Body.Close()
		t.Fatal("hostPort still answers after StopPodSandbox")
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestIntegrationPrivileged: privileged containers and --cap-add ALL run even on hosts
// whose bounding set lacks capabilities (this machine lacks CAP_SYS_RESOURCE), and a
// privileged container can manage the pod's network; an unprivileged one cannot.
func TestIntegrationPrivileged(t *testing.T) {
	e := newEnv(t, true)
	s := startShim(t, e)
	sbCfg := s.sandboxConfig("priv")
	sbCfg.Linux.SecurityContext = &runtimeapi.LinuxSandboxSecurityContext{Privileged: true}
	sbID := s.runSandbox(sbCfg)
	priv := containerConfig("priv", "sleep", "300")
	priv.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{Privileged: true}}
	all := containerConfig("allcaps", "sleep", "300")
	all.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
		Capabilities: &runtimeapi.Capability{AddCapabilities: []string{"ALL"}}}}
	plain := containerConfig("plain", "sleep", "300")
	// Dropping a capability the host may lack (CAP_SYS_RESOURCE here) is no
	// error: Docker 26 refuses to name one it does not have.
	drop := containerConfig("dropper", "sleep", "300")
	drop.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
		Capabilities: &runtimeapi.Capability{DropCapabilities: []string{"SYS_RESOURCE", "NET_RAW"}}}}
	ids := map[string]string{}
	for _, c := range []*runtimeapi.ContainerConfig{priv, all, plain, drop} {
		ids[c.Metadata.Name] = s.createStart(sbID, sbCfg, c)
		s.waitState(ids[c.Metadata.Name], runtimeapi.ContainerState_CONTAINER_RUNNING)
	}
	ctx := ctxT(t)
	r, err := s.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: ids["priv"], Cmd: []string{"brctl", "addbr", "privtest0"}, Timeout: 10})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("privileged brctl addbr: %v %q", err, r.GetStderr())
	}
	r, err = s.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: ids["plain"], Cmd: []string{"brctl", "addbr", "privtest1"}, Timeout: 10})
	if err != nil || r.ExitCode == 0 {
		t.Fatalf("unprivileged brctl addbr succeeded: %v", err)
	}
	if got := s.execOut(ids["allcaps"], "sh", "-c", "grep CapEff /proc/self/status | tr -d '\\t'"); got == "CapEff:0000000000000000" {
		t.Fatalf("ALL capabilities gave none: %s", got)
	}
}
