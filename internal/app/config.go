package app

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Container runtimes --container-runtime accepts.
const (
	RuntimeDocker = "docker"
	RuntimeRemote = "remote"
)

// Config is the validated configuration of one kubelet process.
type Config struct {
	ContainerRuntime          string
	ExperimentalDockershim    bool
	RuntimeEndpoint           string
	ImageServiceEndpoint      string
	DockerEndpoint            string
	PodInfraContainerImage    string
	DockershimRootDirectory   string
	NetworkPlugin             string
	CNIBinDir                 string
	CNIConfDir                string
	CNICacheDir               string
	RuntimeRequestTimeout     time.Duration
	ImagePullProgressDeadline time.Duration
	CgroupDriver              string
	RuntimeCgroups            string
	StreamingAddress          string
	Verbosity                 int
	LoggingFormat             string
	ShowVersion               bool
}

// DefaultConfig returns the kubelet defaults for every flag.
func DefaultConfig() Config {
	return Config{
		ContainerRuntime:          RuntimeDocker,
		RuntimeEndpoint:           "unix:///var/run/dockershim.sock",
		DockerEndpoint:            "unix:///var/run/docker.sock",
		PodInfraContainerImage:    "registry.k8s.io/pause:3.10",
		DockershimRootDirectory:   "/var/lib/dockershim",
		NetworkPlugin:             "cni",
		CNIBinDir:                 "/opt/cni/bin",
		CNIConfDir:                "/etc/cni/net.d",
		CNICacheDir:               "/var/lib/cni/cache",
		RuntimeRequestTimeout:     2 * time.Minute,
		ImagePullProgressDeadline: time.Minute,
		CgroupDriver:              "cgroupfs",
		StreamingAddress:          "127.0.0.1",
		LoggingFormat:             "text",
	}
}

// Validate checks the configuration; each error names the flag.
func (c *Config) Validate() error {
	var errs []error
	switch c.ContainerRuntime {
	case RuntimeDocker, RuntimeRemote:
	default:
		errs = append(errs, fmt.Errorf("--container-runtime=%q is not supported (allowed: docker, remote)", c.ContainerRuntime))
	}
	switch c.NetworkPlugin {
	case "cni", "":
	case "kubenet":
		errs = append(errs, errors.New("--network-plugin=kubenet is not supported; use cni"))
	default:
		errs = append(errs, fmt.Errorf("--network-plugin=%q is not supported (allowed: cni)", c.NetworkPlugin))
	}
	switch c.CgroupDriver {
	case "cgroupfs", "systemd":
	default:
		errs = append(errs, fmt.Errorf("--cgroup-driver=%q is not supported (allowed: cgroupfs, systemd)", c.CgroupDriver))
	}
	switch c.LoggingFormat {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("--logging-format=%q is not supported (allowed: text, json)", c.LoggingFormat))
	}
	if c.Verbosity < 0 {
		errs = append(errs, fmt.Errorf("-v=%d must not be negative", c.Verbosity))
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--runtime-request-timeout", c.RuntimeRequestTimeout}, {"--image-pull-progress-deadline", c.ImagePullProgressDeadline}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s=%s must be positive", d.flag, d.v))
		}
	}
	for _, f := range []struct{ flag, v string }{
		{"--container-runtime-endpoint", c.RuntimeEndpoint}, {"--docker-endpoint", c.DockerEndpoint},
		{"--pod-infra-container-image", c.PodInfraContainerImage}, {"--experimental-dockershim-root-directory", c.DockershimRootDirectory},
		{"--cni-conf-dir", c.CNIConfDir}, {"--cni-bin-dir", c.CNIBinDir},
	} {
		if strings.TrimSpace(f.v) == "" {
			errs = append(errs, fmt.Errorf("%s must not be empty", f.flag))
		}
	}
	if _, err := c.StreamingListenAddr(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// StreamingListenAddr is --streaming-address as host:port (port 0 when only a host is
// given: the kernel picks one).
func (c *Config) StreamingListenAddr() (string, error) {
	a := c.StreamingAddress
	if _, _, err := net.SplitHostPort(a); err == nil {
		return a, nil
	}
	if net.ParseIP(strings.Trim(a, "[]")) == nil && a != "localhost" {
		return "", fmt.Errorf("--streaming-address=%q is not an IP address or host:port", a)
	}
	return net.JoinHostPort(strings.Trim(a, "[]"), "0"), nil
}

// CNIBinDirs splits --cni-bin-dir (comma separated, as the kubelet accepted).
func (c *Config) CNIBinDirs() []string {
	var out []string
	for _, d := range strings.Split(c.CNIBinDir, ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, d)
		}
	}
	return out
}
