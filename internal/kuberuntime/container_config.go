package kuberuntime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// reasonError carries one of the kubelet's reason errors (kubecontainer.ErrCreateContainerCfg,
// kubecontainer.ErrImagePull, ...) with a human-readable message: errors.Is matches both the
// reason and the underlying cause, and Error() is the message alone, ready for a
// container's waiting state.
type reasonError struct {
	reason error
	msg    string
	cause  error
}

func (e *reasonError) Error() string { return e.msg }

func (e *reasonError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.reason}
	}
	return []error{e.reason, e.cause}
}

// newReasonError returns a reasonError whose message is the formatted text.
func newReasonError(reason, cause error, format string, args ...any) error {
	return &reasonError{reason: reason, msg: fmt.Sprintf(format, args...), cause: cause}
}

// configError wraps err as a CreateContainerConfigError, keeping err's message.
func configError(err error) error {
	var re *reasonError
	if errors.As(err, &re) && errors.Is(err, kubecontainer.ErrCreateContainerCfg) {
		return err
	}
	return &reasonError{reason: kubecontainer.ErrCreateContainerCfg, msg: err.Error(), cause: err}
}

// generateContainerConfig builds the CRI config of one container of the pod, as the
// upstream kubelet does. Steps:
//  1. ask the kubelet for the run options (env, mounts, devices, hostname);
//  2. look up the image's user and enforce runAsNonRoot;
//  3. expand $(VAR) in command and args; create the container's log directory;
//  4. fill in the config: image, command, mounts (plus the termination message
//     file), devices, log path, labels, annotations, env and the Linux part
//     (resources and security context).
//
// The returned cleanup (never nil) releases what the run options hold; the caller
// runs it once the container is created, or on error. Errors match
// kubecontainer.ErrCreateContainerCfg.
func (m *Manager) generateContainerConfig(ctx context.Context, container *v1.Container, pod *v1.Pod, restartCount int, podIP string, podIPs []string, imageRef string) (*runtimeapi.ContainerConfig, func(), error) {
	opts, cleanup, err := m.helper.GenerateRunContainerOptions(ctx, pod, container, podIP, podIPs)
	if cleanup == nil {
		cleanup = func() {}
	}
	if err != nil {
		return nil, cleanup, newReasonError(kubecontainer.ErrCreateContainerCfg, err, "generate run options for container %q: %v", container.Name, err)
	}

	image := imageRef
	if image == "" {
		image = container.Image
	}
	uid, username, err := m.imageUser(ctx, image)
	if err != nil {
		return nil, cleanup, configError(err)
	}
	if err := verifyRunAsNonRoot(pod, container, uid, username); err != nil {
		return nil, cleanup, configError(err)
	}

	command, args := expandCommandAndArgs(container, opts.Envs)
	logDir := filepath.Join(buildPodLogsDirectory(m.logsRoot(), pod.Namespace, pod.Name, pod.UID), container.Name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, cleanup, newReasonError(kubecontainer.ErrCreateContainerCfg, err, "create container log directory for container %s failed: %v", container.Name, err)
	}

	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: container.Name, Attempt: uint32(restartCount)},
		Image:       &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: container.Image},
		Command:     command,
		Args:        args,
		WorkingDir:  container.WorkingDir,
		Labels:      newContainerLabels(container, pod),
		Annotations: newContainerAnnotations(container, pod, restartCount),
		Devices:     makeDevices(opts),
		CDIDevices:  makeCDIDevices(opts),
		Mounts:      m.makeMounts(opts, container),
		LogPath:     buildContainerLogsPath(container.Name, restartCount),
		Stdin:       container.Stdin,
		StdinOnce:   container.StdinOnce,
		Tty:         container.TTY,
		Envs:        makeEnvs(opts),
	}
	for k, v := range opts.Annotations {
		if _, ok := cfg.Annotations[k]; !ok {
			cfg.Annotations[k] = v
		}
	}
	lc, err := m.generateLinuxContainerConfig(container, pod, uid, username)
	if err != nil {
		return nil, cleanup, configError(err)
	}
	cfg.Linux = lc
	return cfg, cleanup, nil
}

// imageUser returns the user an image runs as: a numeric uid, or a non-numeric user
// name, or uid 0 when the image names none.
func (m *Manager) imageUser(ctx context.Context, image string) (*int64, string, error) {
	resp, err := m.images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image}, false)
	if err != nil {
		return nil, "", fmt.Errorf("image status of %q: %w", image, err)
	}
	if img := resp.GetImage(); img != nil {
		if img.Uid != nil {
			uid := img.Uid.Value
			return &uid, "", nil
		}
		if img.Username != "" {
			return nil, img.Username, nil
		}
	}
	root := int64(0)
	return &root, "", nil
}

// verifyRunAsNonRoot enforces runAsNonRoot: the effective runAsUser must not be 0;
// without one, the image's user must be a numeric non-zero uid.
func verifyRunAsNonRoot(pod *v1.Pod, container *v1.Container, uid *int64, username string) error {
	sc := effectiveSecurityContext(pod, container)
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		return nil
	}
	where := fmt.Sprintf("(pod: %q, container: %s)", pod.Name+"_"+pod.Namespace+"("+string(pod.UID)+")", container.Name)
	if sc.RunAsUser != nil {
		if *sc.RunAsUser == 0 {
			return fmt.Errorf("container's runAsUser breaks non-root policy %s", where)
		}
		return nil
	}
	switch {
	case uid != nil && *uid == 0:
		return fmt.Errorf("container has runAsNonRoot and image will run as root %s", where)
	case uid == nil && username != "":
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root %s", username, where)
	}
	return nil
}

// effectiveSecurityContext merges the pod's security context into the container's: the
// container's fields win, the pod supplies SELinux options, runAsUser, runAsGroup,
// runAsNonRoot and the seccomp and AppArmor profiles. Never nil.
func effectiveSecurityContext(pod *v1.Pod, container *v1.Container) *v1.SecurityContext {
	out := &v1.SecurityContext{}
	if psc := pod.Spec.SecurityContext; psc != nil {
		out.SELinuxOptions = psc.SELinuxOptions
		out.RunAsUser = psc.RunAsUser
		out.RunAsGroup = psc.RunAsGroup
		out.RunAsNonRoot = psc.RunAsNonRoot
		out.SeccompProfile = psc.SeccompProfile
		out.AppArmorProfile = psc.AppArmorProfile
	}
	csc := container.SecurityContext
	if csc == nil {
		return out
	}
	if csc.SELinuxOptions != nil {
		out.SELinuxOptions = csc.SELinuxOptions
	}
	if csc.RunAsUser != nil {
		out.RunAsUser = csc.RunAsUser
	}
	if csc.RunAsGroup != nil {
		out.RunAsGroup = csc.RunAsGroup
	}
	if csc.RunAsNonRoot != nil {
		out.RunAsNonRoot = csc.RunAsNonRoot
	}
	if csc.SeccompProfile != nil {
		out.SeccompProfile = csc.SeccompProfile
	}
	if csc.AppArmorProfile != nil {
		out.AppArmorProfile = csc.AppArmorProfile
	}
	out.Capabilities = csc.Capabilities
	out.Privileged = csc.Privileged
	out.ReadOnlyRootFilesystem = csc.ReadOnlyRootFilesystem
	out.AllowPrivilegeEscalation = csc.AllowPrivilegeEscalation
	out.ProcMount = csc.ProcMount
	return out
}

// makeEnvs converts the resolved environment.
func makeEnvs(opts *kubecontainer.RunContainerOptions) []*runtimeapi.KeyValue {
	envs := make([]*runtimeapi.KeyValue, 0, len(opts.Envs))
	for _, e := range opts.Envs {
		envs = append(envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
	}
	return envs
}

// makeDevices converts the devices of the run options.
func makeDevices(opts *kubecontainer.RunContainerOptions) []*runtimeapi.Device {
	devices := make([]*runtimeapi.Device, 0, len(opts.Devices))
	for _, d := range opts.Devices {
		devices = append(devices, &runtimeapi.Device{HostPath: d.PathOnHost, ContainerPath: d.PathInContainer, Permissions: d.Permissions})
	}
	return devices
}

// makeCDIDevices converts the CDI devices of the run options (nil without).
func makeCDIDevices(opts *kubecontainer.RunContainerOptions) []*runtimeapi.CDIDevice {
	var out []*runtimeapi.CDIDevice
	for _, name := range opts.CDIDevices {
		out = append(out, &runtimeapi.CDIDevice{Name: name})
	}
	return out
}

// makeMounts converts the mounts of the run options and adds the termination message
// file: a fresh, world-writable file under the pod's container directory (one per
// container instance, so a restarted container starts with an empty message),
// mounted at the container's terminationMessagePath unless a mount already covers it.
func (m *Manager) makeMounts(opts *kubecontainer.RunContainerOptions, container *v1.Container) []*runtimeapi.Mount {
	selinux := selinuxEnabled()
	mounts := make([]*runtimeapi.Mount, 0, len(opts.Mounts)+1)
	covered := false
	for _, v := range opts.Mounts {
		mounts = append(mounts, &runtimeapi.Mount{
			ContainerPath:  v.ContainerPath,
			HostPath:       v.HostPath,
			Readonly:       v.ReadOnly,
			SelinuxRelabel: v.SELinuxRelabel && selinux,
			Propagation:    v.Propagation,
		})
		if filepath.Clean(v.ContainerPath) == filepath.Clean(container.TerminationMessagePath) {
			covered = true
		}
	}
	if opts.PodContainerDir == "" || container.TerminationMessagePath == "" || covered {
		return mounts
	}
	hostPath, err := createTerminationMessageFile(opts.PodContainerDir)
	if err != nil {
		m.logger.Error("create termination message file", zap.String("container", container.Name), zap.Error(err))
		return mounts
	}
	return append(mounts, &runtimeapi.Mount{
		ContainerPath:  container.TerminationMessagePath,
		HostPath:       hostPath,
		SelinuxRelabel: selinux,
	})
}

// createTerminationMessageFile creates an empty, mode 0666 file with a random name in
// dir and returns its path.
func createTerminationMessageFile(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("create pod container directory: %w", err)
	}
	var id [4]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", fmt.Errorf("random file name: %w", err)
	}
	path := filepath.Join(dir, hex.EncodeToString(id[:]))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
	if err != nil {
		return "", fmt.Errorf("create %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("close %s: %w", path, err)
	}
	// The umask applied at creation; the container may run as any user.
	if err := os.Chmod(path, 0o666); err != nil {
		return "", fmt.Errorf("chmod %s: %w", path, err)
	}
	return path, nil
}
