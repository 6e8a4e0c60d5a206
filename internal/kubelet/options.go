package kubelet

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podworkers"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/status"
	"github.com/kubelet-dockershim/kubelet/internal/kuberuntime"
)

// Defaults applied to zero-valued Options fields.
const (
	DefaultRootDir              = "/var/lib/kubelet"
	DefaultClusterDomain        = "cluster.local"
	DefaultResyncInterval       = 10 * time.Second
	DefaultHousekeepingInterval = 2 * time.Second
	DefaultGCInterval           = time.Minute
	DefaultRuntimeCheckInterval = 5 * time.Second
	DefaultMaxPods              = 110
	defaultBackOffPeriod        = 10 * time.Second
	crashLoopBackOffInitial     = 10 * time.Second
	crashLoopBackOffMax         = 300 * time.Second
)

// Options configures a Kubelet (and its RuntimeHelper, see NewRuntimeHelper).
type Options struct {
	// NodeName is the node's name (spec.nodeName of the pods).
	NodeName string
	// NodeIP is the node's IP: the pods' hostIP, status.hostIP in the downward API
	// and the pod IP of host-network pods. nil leaves them empty.
	NodeIP net.IP
	// RootDir is the kubelet's directory; pods live in RootDir/pods/<uid>.
	// Default /var/lib/kubelet.
	RootDir string
	// NodeCapacity is the default limit of containers that set none, as the
	// downward API reports it. nil: the machine's CPUs, memory and RootDir
	// filesystem size, read once on first use.
	NodeCapacity v1.ResourceList
	// ClusterDomain makes a pod's FQDN <subdomain>.<ns>.svc.<domain>; default
	// cluster.local.
	ClusterDomain string

	// Runtime is the runtime manager (required for New). Its RuntimeHelper must be
	// Helper, so build Helper first with NewRuntimeHelper.
	Runtime Runtime
	// Helper is the kuberuntime.RuntimeHelper the Runtime was built with. nil:
	// New builds one (only right when the Runtime does not call back).
	Helper *RuntimeHelper
	// Sources delivers pods (required). The caller runs it (podsource.Source.Run).
	Sources PodSource
	// PLEG reports container changes (required). Run runs it.
	PLEG PLEG
	// Cache is the PLEG's pod status cache, which the pod workers read. Required
	// unless NewPodWorkers is set.
	Cache *kubecontainer.Cache
	// Prober runs probes (required).
	Prober Prober
	// Volumes sets up pod volumes (required).
	Volumes VolumeManager
	// DNS computes the pods' resolv.conf (required for the RuntimeHelper).
	DNS DNSConfigurer
	// Status is the pod status store; share it with the prober (its
	// StatusProvider). nil: a new one.
	Status *status.Manager
	// NewPodWorkers builds the pod workers around the kubelet's sync functions.
	// nil: podworkers.New with Cache, ResyncInterval and a 10s back-off.
	NewPodWorkers func(sync podworkers.SyncFuncs) PodWorkers
	// Node gives the node object pods are admitted against (node selector,
	// affinity, allocatable); nil: only the pod count and host ports are checked.
	Node NodeGetter
	// Mirrors keeps an API mirror pod for each static pod; nil: none (no API
	// server).
	Mirrors MirrorClient
	// Secrets reads the pods' image pull secrets; nil: pulls carry no
	// credentials.
	Secrets SecretGetter
	// EnvObjects reads the configMaps and secrets of env and envFrom; nil: a
	// standalone kubelet (required references fail, optional ones are skipped).
	EnvObjects EnvObjects
	// Services lists the services of the pods' service environment variables;
	// nil: none.
	Services ServiceLister
	// Recorder records pod events; nil records nothing.
	Recorder Recorder
	// Logger; nil: no logging.
	Logger *zap.Logger

	// ResyncInterval is how often every pod is synced; default 10s.
	ResyncInterval time.Duration
	// HousekeepingInterval is how often orphans are cleaned up; default 2s.
	HousekeepingInterval time.Duration
	// GCInterval is how often dead containers are collected; default 1m.
	GCInterval time.Duration
	// GCPolicy is the container GC policy (zero value: MinAge 0,
	// MaxPerPodContainer 1, MaxContainers -1).
	GCPolicy kuberuntime.GCPolicy
	// MaxPods is how many active pods the node admits; default 110.
	MaxPods int
	// CrashLoopBackOff is the container restart back-off; default 10s doubling
	// to 300s.
	CrashLoopBackOff *flowcontrol.Backoff
}

// withDefaults returns opts with defaults applied.
func (opts Options) withDefaults() Options {
	if opts.RootDir == "" {
		opts.RootDir = DefaultRootDir
	}
	if opts.ClusterDomain == "" {
		opts.ClusterDomain = DefaultClusterDomain
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.ResyncInterval <= 0 {
		opts.ResyncInterval = DefaultResyncInterval
	}
	if opts.HousekeepingInterval <= 0 {
		opts.HousekeepingInterval = DefaultHousekeepingInterval
	}
	if opts.GCInterval <= 0 {
		opts.GCInterval = DefaultGCInterval
	}
	if opts.GCPolicy == (kuberuntime.GCPolicy{}) {
		opts.GCPolicy = kuberuntime.GCPolicy{MaxPerPodContainer: 1, MaxContainers: -1}
	}
	if opts.MaxPods <= 0 {
		opts.MaxPods = DefaultMaxPods
	}
	if opts.CrashLoopBackOff == nil {
		opts.CrashLoopBackOff = flowcontrol.NewBackOff(crashLoopBackOffInitial, crashLoopBackOffMax)
	}
	return opts
}

// validateHelper checks what the RuntimeHelper needs.
func (opts Options) validateHelper() error {
	if !filepath.IsAbs(opts.RootDir) {
		return fmt.Errorf("kubelet: RootDir %q must be absolute", opts.RootDir)
	}
	if opts.DNS == nil {
		return errors.New("kubelet: Options.DNS is required")
	}
	return nil
}

// validate checks the required dependencies of the Kubelet.
func (opts Options) validate() error {
	if err := opts.validateHelper(); err != nil {
		return err
	}
	for _, dep := range []struct {
		name    string
		missing bool
	}{
		{"Runtime", opts.Runtime == nil},
		{"Sources", opts.Sources == nil},
		{"PLEG", opts.PLEG == nil},
		{"Prober", opts.Prober == nil},
		{"Volumes", opts.Volumes == nil},
		{"Cache", opts.Cache == nil && opts.NewPodWorkers == nil},
	} {
		if dep.missing {
			return fmt.Errorf("kubelet: Options.%s is required", dep.name)
		}
	}
	return nil
}
