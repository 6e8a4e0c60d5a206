package prober

import kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"

// LivenessFailed reports whether the container's latest liveness result is Failure
// (the runtime manager then restarts it).
func (r *Results) LivenessFailed(id kubecontainer.ContainerID) bool {
	return r.resultIs(Liveness, id, Failure)
}

// StartupFailed reports whether the container's latest startup result is Failure.
func (r *Results) StartupFailed(id kubecontainer.ContainerID) bool {
	return r.resultIs(Startup, id, Failure)
}

// StartupSucceeded reports whether the container's startup probe has succeeded (a
// sidecar with a startup probe holds back the next init container until then).
func (r *Results) StartupSucceeded(id kubecontainer.ContainerID) bool {
	return r.resultIs(Startup, id, Success)
}

func (r *Results) resultIs(t ProbeType, id kubecontainer.ContainerID, want Result) bool {
	got, ok := r.Result(t, id)
	return ok && got == want
}
