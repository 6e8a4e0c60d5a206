package volumes

import (
	"context"
	"fmt"
	"net"
	"os"
	"path"
	"slices"
	"strings"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
)

// NFSPluginDir holds a pod's NFS volumes under <pod>/volumes (upstream's
// in-tree nfs plugin).
const NFSPluginDir = "kubernetes.io~nfs"

// setUpNFS mounts an NFS export for the pod on
// <pod>/volumes/kubernetes.io~nfs/<name> as upstream's nfs plugin does:
// `mount -t nfs -o <options> <server>:<path> <dir>` (the mount.nfs helper
// negotiates the version), an IPv6 server in brackets, the options the PV's
// mountOptions and "ro" for a read-only volume (sorted, each once), no
// fsGroup change. A directory already mounted is kept; a failed mount
// leaves nothing behind. name is the pod volume's name, or the PV's.
func (m *Manager) setUpNFS(ctx context.Context, pod *v1.Pod, name string, src *v1.NFSVolumeSource, readOnly bool, mountOptions []string) (VolumeInfo, error) {
	server, err := nfsServer(src.Server)
	if err != nil {
		return VolumeInfo{}, err
	}
	if !path.IsAbs(src.Path) {
		return VolumeInfo{}, fmt.Errorf("nfs volume %s: path %q must be an absolute path", name, src.Path)
	}
	dir := m.volumePath(pod.UID, NFSPluginDir, name)
	info := VolumeInfo{HostPath: dir, ReadOnly: readOnly}
	if fsType, err := mountFSType(dir); err == nil && strings.HasPrefix(fsType, "nfs") {
		return info, nil // mounted by an earlier sync
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return VolumeInfo{}, err
	}
	var system []string
	if readOnly {
		system = append(system, "ro")
	}
	options := joinMountOptions(mountOptions, system)
	args := []string{"-t", "nfs"}
	if len(options) > 0 {
		args = append(args, "-o", strings.Join(options, ","))
	}
	source := server + ":" + src.Path
	args = append(args, source, dir)
	if out, err := runMount(ctx, args...); err != nil {
		if fsType, ferr := mountFSType(dir); ferr == nil && fsType != "" {
			_ = unmount(dir)
		}
		_ = os.Remove(dir)
		return VolumeInfo{}, fmt.Errorf("mount failed: %w\nMounting command: mount\nMounting arguments: %s\nOutput: %s",
			err, strings.Join(args, " "), strings.TrimSpace(out))
	}
	m.logger.Info("Mounted NFS volume", zap.String("volume", name), zap.String("source", source),
		zap.Strings("options", options), zap.String("podUID", string(pod.UID)))
	return info, nil
}

// nfsServer checks an NFS server name (a host name or an IP address; it
// reaches mount's command line) and brackets an IPv6 address.
func nfsServer(s string) (string, error) {
	switch {
	case s == "":
		return "", fmt.Errorf("nfs volume: server is empty")
	case strings.HasPrefix(s, "-") || strings.ContainsAny(s, " \t\n,:/") && net.ParseIP(s) == nil:
		return "", fmt.Errorf("nfs volume: server %q is not a host name or an IP address", s)
	}
	if ip := net.ParseIP(s); ip != nil && ip.To4() == nil {
		return "[" + s + "]", nil
	}
	return s, nil
}

// joinMountOptions is upstream's JoinMountOptions: the user's options (empty
// ones dropped) and the system's, each once, sorted.
func joinMountOptions(user, system []string) []string {
	var out []string
	for _, o := range append(slices.Clone(user), system...) {
		if o != "" && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	slices.Sort(out)
	return out
}
