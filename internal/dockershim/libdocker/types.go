// Package libdocker is the only package of this project that imports the Docker Engine
// client (github.com/docker/docker). It offers a narrow, context-first client with API
// version negotiation, NotFound/Conflict sentinels and an image pull progress deadline,
// and re-exports as aliases the few Docker API types its callers need.
//
// Only packages under internal/dockershim may import it.
package libdocker

import (
	"errors"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/go-connections/nat"
)

// Aliases of the Docker API types used by the shim, so that callers never import Docker.
type (
	ContainerSummary   = container.Summary
	ContainerJSON      = container.InspectResponse
	ContainerJSONBase  = container.ContainerJSONBase
	ContainerConfig    = container.Config
	HostConfig         = container.HostConfig
	Resources          = container.Resources
	UpdateConfig       = container.UpdateConfig
	RestartPolicy      = container.RestartPolicy
	LogConfig          = container.LogConfig
	DeviceMapping      = container.DeviceMapping
	DeviceRequest      = container.DeviceRequest
	NetworkMode        = container.NetworkMode
	IpcMode            = container.IpcMode
	PidMode            = container.PidMode
	UTSMode            = container.UTSMode
	ContainerState     = container.State
	ListOptions        = container.ListOptions
	LogsOptions        = container.LogsOptions
	AttachOptions      = container.AttachOptions
	ExecOptions        = container.ExecOptions
	ExecInspect        = container.ExecInspect
	ResizeOptions      = container.ResizeOptions
	HijackedResponse   = types.HijackedResponse
	Mount              = mount.Mount
	MountType          = mount.Type
	MountPropagation   = mount.Propagation
	BindOptions        = mount.BindOptions
	ImageSummary       = image.Summary
	ImageInspect       = image.InspectResponse
	ImageDeleteItem    = image.DeleteResponse
	AuthConfig         = registry.AuthConfig
	Info               = system.Info
	Version            = types.Version
	EventMessage       = events.Message
	EventsOptions      = events.ListOptions
	FilterArgs         = filters.Args
	FilterKeyValuePair = filters.KeyValuePair
	PortSet            = nat.PortSet
	PortMap            = nat.PortMap
	EndpointSettings   = network.EndpointSettings
	Ulimit             = container.Ulimit
)

// Mount types and propagation modes re-exported for callers.
const (
	MountTypeBind  = mount.TypeBind
	MountTypeTmpfs = mount.TypeTmpfs

	PropagationPrivate  = mount.PropagationPrivate
	PropagationRSlave   = mount.PropagationRSlave
	PropagationRShared  = mount.PropagationRShared
	PropagationRPrivate = mount.PropagationRPrivate
)

// NewFilterArgs builds Docker list filters from key/value pairs.
func NewFilterArgs(pairs ...FilterKeyValuePair) FilterArgs { return filters.NewArgs(pairs...) }

// FilterArg is one key/value pair of a Docker list filter.
func FilterArg(key, value string) FilterKeyValuePair { return filters.Arg(key, value) }

// Sentinel errors. Every error returned by Client wraps one of them when it applies,
// so callers match with errors.Is.
var (
	// ErrNotFound: the container, exec instance or image does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the object is in use or in a state that forbids the operation.
	ErrConflict = errors.New("conflict")
	// ErrPullStalled: an image pull made no progress within the progress deadline.
	ErrPullStalled = errors.New("image pull made no progress")
)
