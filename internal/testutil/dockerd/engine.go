package dockerd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// HostEndpoint is the host's dockerd, shared by every test.
const HostEndpoint = "unix:///var/run/docker.sock"

// Engine is the Docker Engine a Daemon runs.
type Engine string

const (
	// HostEngine is the dockerd on PATH: Debian 12's docker.io 20.10, as the
	// host's own daemon.
	HostEngine Engine = ""
	// Docker26 is Debian 13's docker.io 26.1 with its containerd and runc,
	// unpacked (not installed) by scripts/docker26.sh.
	Docker26 Engine = "26"
)

// dockerd returns the daemon program of e.
func (e Engine) dockerd() (string, error) {
	switch e {
	case HostEngine:
		p, err := exec.LookPath("dockerd")
		if err != nil {
			return "", fmt.Errorf("dockerd is required (scripts/prepare-host.sh installs it): %w", err)
		}
		return p, nil
	case Docker26:
		// scripts/docker26.sh writes VERSIONS last.
		if _, err := os.Stat(filepath.Join(docker26Dir(), "VERSIONS")); err != nil {
			return "", fmt.Errorf("docker 26 is not unpacked in %s (run scripts/docker26.sh, or scripts/prepare-host.sh): %w",
				docker26Dir(), err)
		}
		return filepath.Join(docker26Dir(), "bin", "dockerd"), nil
	}
	return "", fmt.Errorf("dockerd: unknown engine %q (want %q or %q)", string(e), HostEngine, Docker26)
}

// check fails when serverVersion, as the started daemon reports it, is not e's.
func (e Engine) check(serverVersion string) error {
	if e == Docker26 && !strings.HasPrefix(serverVersion, "26.") {
		return fmt.Errorf("the Docker 26 daemon reports version %q", serverVersion)
	}
	return nil
}

// docker26Dir is where scripts/docker26.sh unpacks Docker 26 (its dockerd
// wrapper is bin/dockerd): under $KDS_CACHE_DIR, as the scripts (lib.sh) have it.
func docker26Dir() string {
	cache := os.Getenv("KDS_CACHE_DIR")
	if cache == "" {
		cache = "/var/cache/kubelet-dockershim"
	}
	return filepath.Join(cache, "docker26")
}

// EngineEnv names the environment variable that RunMain reads: unset or
// "host" for the host's dockerd, "26" for a private Docker 26 daemon.
const EngineEnv = "DOCKERSHIM_TEST_DOCKER"

// engineFromEnv returns the engine $DOCKERSHIM_TEST_DOCKER names, and whether
// it asks for a private daemon.
func engineFromEnv() (Engine, bool, error) {
	switch v := os.Getenv(EngineEnv); v {
	case "", "host":
		return HostEngine, false, nil
	case string(Docker26):
		return Docker26, true, nil
	default:
		return "", false, fmt.Errorf("%s=%q: want host or %s", EngineEnv, v, Docker26)
	}
}

// Endpoint is the dockerd the tests of a package run against: $DOCKER_HOST,
// which RunMain sets for a private daemon (the docker CLI follows it too),
// or else the host's.
func Endpoint() string {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	return HostEndpoint
}

// RunMain runs a package's tests and returns the code for os.Exit. Unless
// $DOCKERSHIM_TEST_DOCKER asks for another engine they run against the
// host's dockerd; otherwise against one private daemon of that engine,
// holding images (copied from the host's dockerd), started before and
// removed after them, with DOCKER_HOST set to it. A daemon that does not
// start (a missing engine included) fails the run. Tests reach the daemon
// through Endpoint and the docker CLI.
//
//	func TestMain(m *testing.M) { os.Exit(dockerd.RunMain(m, "registry.k8s.io/pause:3.10")) }
func RunMain(m *testing.M, images ...string) int {
	engine, private, err := engineFromEnv()
	if err == nil && !private {
		return m.Run()
	}
	var d *Daemon
	if err == nil {
		d, err = StartShared(Options{Engine: engine, Images: images})
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the tests' private dockerd: %v\n", err)
		return 1
	}
	defer d.Close()
	if err := os.Setenv("DOCKER_HOST", d.Endpoint); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	version, err := d.CLI(context.Background(), "version", "--format", "{{.Server.Version}} (API {{.Server.APIVersion}})")
	fmt.Fprintf(os.Stderr, "dockerd: tests run against a private Docker %s at %s\n", strings.TrimSpace(version),
		d.Endpoint)
	if err != nil {
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "--- tail of the private dockerd's log (%s):\n%s\n", d.logPath, d.LogTail(40))
	}
	return code
}

// EngineFromEnv is the daemon program of the engine $DOCKERSHIM_TEST_DOCKER
// names (the host's dockerd when unset), for suites that run their own
// private daemon, and a check of the version that daemon reports.
func EngineFromEnv() (program string, check func(serverVersion string) error, err error) {
	engine, _, err := engineFromEnv()
	if err != nil {
		return "", nil, err
	}
	program, err = engine.dockerd()
	return program, engine.check, err
}
