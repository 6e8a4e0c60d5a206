//go:build linux

package dockershim

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
	"github.com/kubelet-dockershim/kubelet/internal/oomlog"
)

// oomBlindDocker is Docker as it is when containerd missed a container's OOM
// notification: the exit is there, OOMKilled is false.
type oomBlindDocker struct{ dockerClient }

func (d oomBlindDocker) InspectContainer(ctx context.Context, id string) (libdocker.ContainerJSON, error) {
	j, err := d.dockerClient.InspectContainer(ctx, id)
	if j.State != nil {
		st := *j.State
		st.OOMKilled = false
		j.State = &st
	}
	return j, err
}

// TestIntegrationKernelOOMKill: a real container the kernel OOM-kills, read
// through a Docker that did not hear of it, is reported OOMKilled from the
// real kernel log; without the log it would be an Error exit. A container
// killed by a signal, not for memory, stays an Error exit with the log.
func TestIntegrationKernelOOMKill(t *testing.T) {
	fixtureEnsureImage(t)
	s := fixtureService(t)
	s.docker = oomBlindDocker{s.docker}
	kmsg, err := oomlog.Open(oomlog.DevKmsg, oomlog.Options{Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kmsg.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	managed := []string{"--label", labelManaged + "=true", "--label", labelType + "=" + typeContainer}
	hog := fixtureRun(t, append(managed, "-m", "16m", "--memory-swap", "16m", fixtureImage, "sh", "-c", "head -c 200m /dev/zero | tail")...)
	killed := fixtureRun(t, append(managed, fixtureImage, "sleep", "600")...)
	fixtureDocker(t, "kill", killed)
	fixtureDocker(t, "wait", hog)
	fixtureDocker(t, "wait", killed)

	status := func(id string) *runtimeapi.ContainerStatus {
		t.Helper()
		st, err := s.containerStatus(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	s.oomLog = nil
	if st := status(hog); st.Reason != reasonError || st.ExitCode != 137 {
		t.Fatalf("without the kernel log the hog = %s %d, want Error 137 (Docker's word here)", st.Reason, st.ExitCode)
	}
	s.oomLog = kmsg
	if st := status(hog); st.Reason != reasonOOMKilled || st.ExitCode != 137 {
		t.Errorf("with the kernel log the hog = %s %d, want OOMKilled 137", st.Reason, st.ExitCode)
	}
	if st := status(killed); st.Reason != reasonError || st.ExitCode != 137 {
		t.Errorf("a container killed by a signal = %s %d, want Error 137", st.Reason, st.ExitCode)
	}
}
