package prober

import kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"

// LivenessFailed reports whether the container's latest liveness result is Failure
// (the runtime manager then restarts it).
func (m *Manager) LivenessFailed(id kubecontainer.ContainerID) bool {
	return m.resultIs(Liveness, id, Failure)
}

// StartupFailed reports whether the container's latest startup result is Failure.
func (m *Manager) StartupFailed(id kubecontainer.ContainerID) bool {
	return m.resultIs(Startup, id, Failure)
}

// StartupSucceeded reports whether the container's startup probe has succeeded (a
// sidecar with a startup probe holds back the next init container until then).
func (m *Manager) StartupSucceeded(id kubecontainer.ContainerID) bool {
	return m.resultIs(Startup, id, Success)
}

func (m *Manager) resultIs(t ProbeType, id kubecontainer.ContainerID, want Result) bool {
	r, ok := m.Result(t, id)
	return ok && r == want
}
