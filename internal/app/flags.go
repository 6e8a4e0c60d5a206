package app

import (
	"github.com/spf13/pflag"
)

// addFlags binds the kubelet-compatible flags to cfg (already holding the defaults).
func addFlags(fs *pflag.FlagSet, cfg *Config) {
	fs.StringVar(&cfg.ContainerRuntime, "container-runtime", cfg.ContainerRuntime, "The container runtime to use: docker (built-in dockershim) or remote (a CRI endpoint).")
	fs.BoolVar(&cfg.ExperimentalDockershim, "experimental-dockershim", cfg.ExperimentalDockershim, "Run only the dockershim CRI server on --container-runtime-endpoint and nothing else.")
	fs.StringVar(&cfg.RuntimeEndpoint, "container-runtime-endpoint", cfg.RuntimeEndpoint, "The CRI endpoint: where the built-in dockershim serves, or the remote runtime to dial.")
	fs.StringVar(&cfg.ImageServiceEndpoint, "image-service-endpoint", cfg.ImageServiceEndpoint, "The CRI image service endpoint (defaults to --container-runtime-endpoint).")
	fs.StringVar(&cfg.DockerEndpoint, "docker-endpoint", cfg.DockerEndpoint, "The Docker daemon endpoint.")
	fs.StringVar(&cfg.PodInfraContainerImage, "pod-infra-container-image", cfg.PodInfraContainerImage, "The image of each pod's sandbox (pause) container.")
	fs.StringVar(&cfg.DockershimRootDirectory, "experimental-dockershim-root-directory", cfg.DockershimRootDirectory, "The dockershim's state directory (sandbox checkpoints).")
	fs.StringVar(&cfg.NetworkPlugin, "network-plugin", cfg.NetworkPlugin, "The network plugin: cni.")
	fs.StringVar(&cfg.CNIBinDir, "cni-bin-dir", cfg.CNIBinDir, "Comma-separated directories holding CNI plugin binaries.")
	fs.StringVar(&cfg.CNIConfDir, "cni-conf-dir", cfg.CNIConfDir, "The directory holding CNI network configs; the first in lexical order is the pod network.")
	fs.StringVar(&cfg.CNICacheDir, "cni-cache-dir", cfg.CNICacheDir, "The CNI cache directory.")
	fs.DurationVar(&cfg.RuntimeRequestTimeout, "runtime-request-timeout", cfg.RuntimeRequestTimeout, "Timeout of every CRI request except long-running ones (pull, logs, exec, attach).")
	fs.DurationVar(&cfg.ImagePullProgressDeadline, "image-pull-progress-deadline", cfg.ImagePullProgressDeadline, "Cancel an image pull that makes no progress for this long.")
	fs.StringVar(&cfg.CgroupDriver, "cgroup-driver", cfg.CgroupDriver, "The kubelet's cgroup driver: cgroupfs or systemd (must match Docker's).")
	fs.StringVar(&cfg.RuntimeCgroups, "runtime-cgroups", cfg.RuntimeCgroups, "Optional absolute name of the cgroup to put the container runtime in.")
	fs.StringVar(&cfg.StreamingAddress, "streaming-address", cfg.StreamingAddress, "The address (IP, or IP:port) the exec/attach/port-forward streaming server binds to.")
	fs.IntVarP(&cfg.Verbosity, "v", "v", cfg.Verbosity, "Log verbosity (4 and above logs debug messages).")
	fs.StringVar(&cfg.LoggingFormat, "logging-format", cfg.LoggingFormat, "Log format: text or json.")
	fs.BoolVar(&cfg.ShowVersion, "version", false, "Print the version and exit.")
}
