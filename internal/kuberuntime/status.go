package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"
	kubelettypes "k8s.io/kubelet/pkg/types"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// Limits on termination messages (upstream values).
const (
	maxTerminationMessageLength     = 1024 * 4 // from the termination message file
	maxTerminationMessageLogLength  = 1024 * 2 // from the logs (FallbackToLogsOnError)
	maxTerminationMessageLogLines   = 80
	containerCannotRunReason        = "ContainerCannotRun"
	errTerminationMessageReadFormat = "Error on reading termination message from logs: %v"
)

// GetPodStatus reads the runtime's view of one pod: every sandbox (newest
// first) with the pod IPs of the newest one when it is ready, and every
// container of the pod (newest first). Objects removed between the list and
// the status calls are skipped.
func (m *Manager) GetPodStatus(ctx context.Context, uid k8stypes.UID, name, namespace string) (*kubecontainer.PodStatus, error) {
	status := &kubecontainer.PodStatus{ID: uid, Name: name, Namespace: namespace, TimeStamp: time.Now()}
	sandboxes, err := m.podSandboxes(ctx, uid)
	if err != nil {
		return nil, err
	}
	for _, sb := range sandboxes {
		resp, err := m.runtime.PodSandboxStatus(ctx, sb.GetId(), false)
		if crierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("pod sandbox status %s of pod %s_%s: %w", sb.GetId(), name, namespace, err)
		}
		s := resp.GetStatus()
		if s == nil {
			return nil, fmt.Errorf("pod sandbox status %s: the runtime returned no status", sb.GetId())
		}
		if len(status.SandboxStatuses) == 0 && s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			status.IPs = sandboxIPs(s, m.logger)
		}
		status.SandboxStatuses = append(status.SandboxStatuses, s)
	}
	containers, err := m.podContainerStatuses(ctx, uid)
	if err != nil {
		return nil, err
	}
	status.ContainerStatuses = containers
	return status, nil
}

// podSandboxes lists the sandboxes of a pod, newest first.
func (m *Manager) podSandboxes(ctx context.Context, uid k8stypes.UID) ([]*runtimeapi.PodSandbox, error) {
	sandboxes, err := m.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{podUIDLabel: string(uid)},
	})
	if err != nil {
		return nil, fmt.Errorf("list pod sandboxes of pod %s: %w", uid, err)
	}
	sort.SliceStable(sandboxes, func(i, j int) bool { return sandboxes[i].GetCreatedAt() > sandboxes[j].GetCreatedAt() })
	return sandboxes, nil
}

// podContainerStatuses reads the status of every container of a pod, newest
// first.
func (m *Manager) podContainerStatuses(ctx context.Context, uid k8stypes.UID) ([]*kubecontainer.ContainerStatus, error) {
	containers, err := m.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{podUIDLabel: string(uid)},
	})
	if err != nil {
		return nil, fmt.Errorf("list containers of pod %s: %w", uid, err)
	}
	statuses := make([]*kubecontainer.ContainerStatus, 0, len(containers))
	for _, c := range containers {
		resp, err := m.runtime.ContainerStatus(ctx, c.GetId(), false)
		if crierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("container status %s of pod %s: %w", c.GetId(), uid, err)
		}
		if resp.GetStatus() == nil {
			return nil, fmt.Errorf("container status %s: the runtime returned no status", c.GetId())
		}
		cs := m.convertContainerStatus(ctx, resp.GetStatus())
		cs.SandboxID = c.GetPodSandboxId()
		statuses = append(statuses, cs)
	}
	sort.SliceStable(statuses, func(i, j int) bool { return statuses[i].CreatedAt.After(statuses[j].CreatedAt) })
	return statuses, nil
}

// convertContainerStatus turns a CRI container status into the kubelet's,
// with hash and restart count from the annotations and, for an exited
// container, the termination message.
func (m *Manager) convertContainerStatus(ctx context.Context, s *runtimeapi.ContainerStatus) *kubecontainer.ContainerStatus {
	a := getAnnotatedInfo(s.GetAnnotations(), m.logger)
	name := getLabeledInfo(s.GetLabels()).ContainerName
	if name == "" {
		name = s.GetMetadata().GetName()
	}
	imageID := s.GetImageRef()
	if s.GetImageId() != "" {
		imageID = s.GetImageId()
	}
	cs := &kubecontainer.ContainerStatus{
		ID:                     m.containerID(s.GetId()),
		Name:                   name,
		State:                  kubecontainer.StateFromCRI(s.GetState()),
		CreatedAt:              criTimeToTime(s.GetCreatedAt()),
		Image:                  s.GetImage().GetImage(),
		ImageID:                imageID,
		ImageRef:               s.GetImageRef(),
		Hash:                   a.Hash,
		RestartCount:           a.RestartCount,
		Resources:              s.GetResources(),
		TerminationMessagePath: a.TerminationMessagePath,
	}
	if s.GetState() != runtimeapi.ContainerState_CONTAINER_CREATED {
		cs.StartedAt = criTimeToTime(s.GetStartedAt())
	}
	if s.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
		cs.Reason = s.GetReason()
		cs.Message = s.GetMessage()
		cs.ExitCode = int(s.GetExitCode())
		cs.FinishedAt = criTimeToTime(s.GetFinishedAt())
		if msg := m.terminationMessage(ctx, s, cs, a); msg != "" {
			if cs.Message != "" {
				cs.Message += ": "
			}
			cs.Message += msg
		}
	}
	return cs
}

// terminationMessage returns what the container wrote to its termination
// message file or, with FallbackToLogsOnError and a failure, the tail of its
// log.
func (m *Manager) terminationMessage(ctx context.Context, s *runtimeapi.ContainerStatus, cs *kubecontainer.ContainerStatus, a annotatedInfo) string {
	fallback := a.TerminationMessagePolicy == v1.TerminationMessageFallbackToLogsOnError &&
		cs.ExitCode != 0 && cs.Reason != containerCannotRunReason
	msg, checkLogs := readTerminationMessageFile(s, a.TerminationMessagePath, fallback)
	if checkLogs && s.GetLogPath() != "" {
		return m.terminationMessageFromLogs(ctx, s.GetLogPath(), s.GetId())
	}
	return msg
}

// readTerminationMessageFile reads the end of the host file mounted at the
// container's termination message path. The bool says whether the logs should
// be read instead (fallback and no message).
func readTerminationMessageFile(s *runtimeapi.ContainerStatus, path string, fallback bool) (string, bool) {
	if path == "" {
		return "", fallback
	}
	for _, mnt := range s.GetMounts() {
		if mnt.GetContainerPath() != path {
			continue
		}
		data, err := readTerminationFileTail(mnt.GetHostPath(), maxTerminationMessageLength)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return "", fallback
			}
			return fmt.Sprintf("Error on reading termination log %s: %v", mnt.GetHostPath(), err), false
		}
		return string(data), fallback && len(data) == 0
	}
	return "", fallback
}

// readTerminationFileTail reads at most max bytes from the end of a regular
// file. The file is the pod's (a subPath of its own volume may be mounted at
// the termination message path): it is opened without blocking (a FIFO
// would hold the relist forever) and without following a symlink as its last
// component, and anything but a regular file (a FIFO, a device node the pod
// made, a directory) is refused, never read.
func readTerminationFileTail(path string, max int64) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("%s is a symlink, not a regular file", path)
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	if off := fi.Size() - max; off > 0 {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// terminationMessageFromLogs returns the last lines of a container log (at
// most 80 lines and 2 KiB).
func (m *Manager) terminationMessageFromLogs(ctx context.Context, logPath, containerID string) string {
	buf := &terminationLogBuffer{max: maxTerminationMessageLogLength}
	opts := &LogOptions{Tail: maxTerminationMessageLogLines}
	if err := m.ReadLogs(ctx, logPath, containerID, opts, buf, buf); err != nil {
		return fmt.Sprintf(errTerminationMessageReadFormat, err)
	}
	return string(buf.data)
}

// terminationLogBuffer keeps the last max bytes written to it.
type terminationLogBuffer struct {
	max  int
	data []byte
}

func (b *terminationLogBuffer) Write(p []byte) (int, error) {
	b.data = append(b.data, p...)
	if over := len(b.data) - b.max; over > 0 {
		b.data = append(b.data[:0], b.data[over:]...)
	}
	return len(p), nil
}

// sandboxIPs returns the valid IPs of a sandbox, primary first.
func sandboxIPs(s *runtimeapi.PodSandboxStatus, logger *zap.Logger) []string {
	n := s.GetNetwork()
	if n == nil {
		return nil
	}
	var ips []string
	for _, ip := range append([]string{n.GetIp()}, additionalIPs(n)...) {
		if ip == "" {
			continue
		}
		if net.ParseIP(ip) == nil {
			logger.Warn("the runtime reported an invalid pod IP", zap.String("sandbox", s.GetId()), zap.String("ip", ip))
			continue
		}
		ips = append(ips, ip)
	}
	return ips
}

func additionalIPs(n *runtimeapi.PodSandboxNetworkStatus) []string {
	var out []string
	for _, ip := range n.GetAdditionalIps() {
		out = append(out, ip.GetIp())
	}
	return out
}

// GetPods lists the pods the runtime has, grouped by the pod UID label of their
// sandboxes and containers. With all false only ready sandboxes and running
// containers are listed.
func (m *Manager) GetPods(ctx context.Context, all bool) ([]*kubecontainer.Pod, error) {
	sbFilter := &runtimeapi.PodSandboxFilter{}
	cFilter := &runtimeapi.ContainerFilter{}
	if !all {
		sbFilter.State = &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}
		cFilter.State = &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}
	}
	sandboxes, err := m.runtime.ListPodSandbox(ctx, sbFilter)
	if err != nil {
		return nil, fmt.Errorf("list pod sandboxes: %w", err)
	}
	containers, err := m.runtime.ListContainers(ctx, cFilter)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	g := podGrouper{byUID: map[k8stypes.UID]*kubecontainer.Pod{}}
	for _, sb := range sandboxes {
		l := getLabeledInfo(sb.GetLabels())
		if l.PodUID == "" {
			l = labeledInfo{PodUID: k8stypes.UID(sb.GetMetadata().GetUid()), PodName: sb.GetMetadata().GetName(), PodNamespace: sb.GetMetadata().GetNamespace()}
		}
		p := g.pod(l)
		if p == nil {
			continue
		}
		p.Sandboxes = append(p.Sandboxes, &kubecontainer.Container{
			ID:    m.containerID(sb.GetId()),
			Name:  kubelettypes.PodInfraContainerName,
			State: sandboxState(sb.GetState()),
		})
		if created := uint64(sb.GetCreatedAt()); created > p.CreatedAt {
			p.CreatedAt = created
		}
	}
	for _, c := range containers {
		p := g.pod(getLabeledInfo(c.GetLabels()))
		if p == nil {
			continue
		}
		p.Containers = append(p.Containers, m.toContainer(c))
	}
	return g.list, nil
}

// toContainer converts a listed CRI container.
func (m *Manager) toContainer(c *runtimeapi.Container) *kubecontainer.Container {
	name := getLabeledInfo(c.GetLabels()).ContainerName
	if name == "" {
		name = c.GetMetadata().GetName()
	}
	imageID := c.GetImageRef()
	if c.GetImageId() != "" {
		imageID = c.GetImageId()
	}
	return &kubecontainer.Container{
		ID:      m.containerID(c.GetId()),
		Name:    name,
		Image:   c.GetImage().GetImage(),
		ImageID: imageID,
		Hash:    getAnnotatedInfo(c.GetAnnotations(), m.logger).Hash,
		State:   kubecontainer.StateFromCRI(c.GetState()),
	}
}

// podGrouper collects pods by UID, in the order first seen.
type podGrouper struct {
	byUID map[k8stypes.UID]*kubecontainer.Pod
	list  []*kubecontainer.Pod
}

// pod returns the pod of l, creating it; nil for objects without a pod UID.
func (g *podGrouper) pod(l labeledInfo) *kubecontainer.Pod {
	if l.PodUID == "" {
		return nil
	}
	if p, ok := g.byUID[l.PodUID]; ok {
		return p
	}
	p := &kubecontainer.Pod{ID: l.PodUID, Name: l.PodName, Namespace: l.PodNamespace}
	g.byUID[l.PodUID] = p
	g.list = append(g.list, p)
	return p
}

// criTimeToTime converts CRI nanoseconds; 0 stays the zero time.
func criTimeToTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
