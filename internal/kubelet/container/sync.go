package container

import (
	"errors"
	"fmt"
)

// SyncAction names one step SyncPod or KillPod took.
type SyncAction string

const (
	StartContainer   SyncAction = "StartContainer"
	KillContainer    SyncAction = "KillContainer"
	CreatePodSandbox SyncAction = "CreatePodSandbox"
	KillPodSandbox   SyncAction = "KillPodSandbox"
	ConfigPodSandbox SyncAction = "ConfigPodSandbox"
	ResizePodInPlace SyncAction = "ResizePodInPlace"
	// RemoveContainer: a container removed so that its pod restarts all its
	// containers in place (RestartAllContainers).
	RemoveContainer SyncAction = "RemoveContainer"
)

// Upstream reasons the kubelet reports in container waiting states and events.
var (
	ErrImagePull          = errors.New("ErrImagePull")
	ErrImagePullBackOff   = errors.New("ImagePullBackOff")
	ErrImageInspect       = errors.New("ImageInspectError")
	ErrImageNeverPull     = errors.New("ErrImageNeverPull")
	ErrInvalidImageName   = errors.New("InvalidImageName")
	ErrCrashLoopBackOff   = errors.New("CrashLoopBackOff")
	ErrCreateContainer    = errors.New("CreateContainerError")
	ErrCreateContainerCfg = errors.New("CreateContainerConfigError")
	ErrRunContainer       = errors.New("RunContainerError")
	ErrPreStartHook       = errors.New("PreStartHookError")
	ErrPostStartHook      = errors.New("PostStartHookError")
	ErrKillContainer      = errors.New("KillContainerError")
	ErrCreatePodSandbox   = errors.New("CreatePodSandboxError")
	ErrConfigPodSandbox   = errors.New("ConfigPodSandboxError")
	ErrKillPodSandbox     = errors.New("KillPodSandboxError")
	ErrResizePodInPlace   = errors.New("ResizePodInPlaceError")
	ErrRemoveContainer    = errors.New("RemoveContainerError")
)

// SyncResult is the outcome of one action on one target (a container name or pod).
type SyncResult struct {
	Action  SyncAction
	Target  string
	Error   error  // one of the reason errors above, or nil
	Message string // human-readable detail
}

// Fail records a failure with its reason and message.
func (r *SyncResult) Fail(err error, msg string) { r.Error, r.Message = err, msg }

// PodSyncResult collects the results of one SyncPod/KillPod.
type PodSyncResult struct {
	SyncResults []*SyncResult
	SyncError   error // an error outside any single action
}

// Add appends a result.
func (p *PodSyncResult) Add(r *SyncResult) { p.SyncResults = append(p.SyncResults, r) }

// AddPodSyncResult merges another PodSyncResult.
func (p *PodSyncResult) AddPodSyncResult(o PodSyncResult) {
	p.SyncResults = append(p.SyncResults, o.SyncResults...)
	if o.SyncError != nil {
		p.SyncError = o.SyncError
	}
}

// Fail records an error outside any single action.
func (p *PodSyncResult) Fail(err error) { p.SyncError = err }

// Error joins every failure, or returns nil.
func (p *PodSyncResult) Error() error {
	var errs []error
	if p.SyncError != nil {
		errs = append(errs, p.SyncError)
	}
	for _, r := range p.SyncResults {
		if r.Error != nil {
			errs = append(errs, fmt.Errorf("failed to %q for %q: %w: %s", r.Action, r.Target, r.Error, r.Message))
		}
	}
	return errors.Join(errs...)
}
