package dockershim

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// linuxCapNames are the kernel's capability names by number (include/uapi/linux/capability.h).
var linuxCapNames = [...]string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
	"CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
	"CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT",
	"CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME",
	"CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL",
	"CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

// detectMissingCaps lists the capabilities the kernel knows but this process's bounding
// set lacks (nested containers and some VMs drop CAP_SYS_RESOURCE). runc refuses to
// grant a capability outside the bounding set, so `--privileged` and `--cap-add ALL`
// fail on such hosts; the shim then grants everything else instead, as containerd does
// by deriving privileged capabilities from its own.
func detectMissingCaps(logger *zap.Logger) []string {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		logger.Warn("read capability bounding set", zap.Error(err))
		return nil
	}
	last, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		logger.Warn("read cap_last_cap", zap.Error(err))
		return nil
	}
	missing, err := missingCaps(string(status), strings.TrimSpace(string(last)))
	if err != nil {
		logger.Warn("parse capability bounding set", zap.Error(err))
		return nil
	}
	if len(missing) > 0 {
		logger.Info("host bounding set lacks capabilities; privileged containers get all others",
			zap.Strings("missing-capabilities", missing))
	}
	return missing
}

// missingCaps parses CapBnd out of /proc/self/status text.
func missingCaps(status, lastCap string) ([]string, error) {
	last, err := strconv.Atoi(lastCap)
	if err != nil {
		return nil, fmt.Errorf("cap_last_cap %q: %w", lastCap, err)
	}
	for _, line := range strings.Split(status, "\n") {
		v, ok := strings.CutPrefix(line, "CapBnd:")
		if !ok {
			continue
		}
		bnd, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("CapBnd %q: %w", v, err)
		}
		var out []string
		for i := 0; i <= last && i < len(linuxCapNames); i++ {
			if bnd&(1<<uint(i)) == 0 {
				out = append(out, linuxCapNames[i])
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("no CapBnd line")
}

// fitCaps makes a container's (or sandbox's) capability request one that the host
// and its daemon can honour when the host's bounding set lacks capabilities
// (h.missingCaps):
//   - a CapDrop of a missing capability is left out: it changes nothing, and a
//     daemon that bounds capabilities (Engine 23 and later) refuses to name one;
//   - with such a daemon, ALL and --privileged already stop at what the daemon
//     has, so nothing else changes;
//   - with an older daemon (20.10), which grants its whole list and lets runc
//     fail, ALL gets the missing capabilities dropped and --privileged is
//     emulated (emulatePrivileged).
//
// An older daemon knows (grants with ALL, accepts in CapDrop) the
// capabilities up to CAP_AUDIT_READ only: a later one that the host lacks is
// never granted, and naming it fails the container ("invalid CapDrop:
// unknown capability: \"CAP_BPF\""). A node container that Engine 20.10
// created is such a host: its bounding set ends at CAP_AUDIT_READ on a newer
// kernel.
func (h *hostInfo) fitCaps(hc *libdocker.HostConfig) {
	if len(h.missingCaps) == 0 {
		return
	}
	hc.CapDrop = withoutCaps(hc.CapDrop, h.missingCaps)
	if h.daemonBoundsCaps {
		return
	}
	drop := knownToLegacyDaemon(h.missingCaps)
	switch {
	case hc.Privileged:
		emulatePrivileged(hc, drop)
	case slices.Contains(hc.CapAdd, "ALL"):
		hc.CapDrop = append(hc.CapDrop, drop...)
	}
}

// legacyDaemonLastCap is the last capability Docker Engine 20.10 knows.
const legacyDaemonLastCap = "CAP_AUDIT_READ"

// knownToLegacyDaemon is caps without those after legacyDaemonLastCap.
func knownToLegacyDaemon(caps []string) []string {
	last := slices.Index(linuxCapNames[:], legacyDaemonLastCap)
	var out []string
	for _, c := range caps {
		if i := slices.Index(linuxCapNames[:], c); i >= 0 && i <= last {
			out = append(out, c)
		}
	}
	return out
}

// withoutCaps is caps (CAP_ names, or ALL) without those in drop, nil when
// nothing is left.
func withoutCaps(caps, drop []string) []string {
	var out []string
	for _, c := range caps {
		if !slices.Contains(drop, c) {
			out = append(out, c)
		}
	}
	return out
}

// emulatePrivileged gives a container what `--privileged` would on a daemon that
// does not bound capabilities, minus the capabilities the host cannot grant: every other capability, no seccomp, AppArmor or
// SELinux confinement, no masked or read-only paths, and access to all host devices.
func emulatePrivileged(hc *libdocker.HostConfig, missing []string) {
	hc.Privileged = false
	hc.CapAdd = []string{"ALL"}
	hc.CapDrop = append([]string(nil), missing...)
	opts := []string{"seccomp=unconfined", "apparmor=unconfined", "label=disable"}
	for _, o := range hc.SecurityOpt {
		if o == "no-new-privileges" {
			opts = append(opts, o)
		}
	}
	hc.SecurityOpt = opts
	hc.MaskedPaths = []string{}
	hc.ReadonlyPaths = []string{}
	hc.DeviceCgroupRules = []string{"a *:* rwm"}
	hc.Devices = append(hc.Devices, hostDevices("/dev")...)
}

// hostDevices lists the character and block devices under dir (one level of
// subdirectories, skipping pseudo-terminals and shared memory).
func hostDevices(dir string) []libdocker.DeviceMapping {
	var out []libdocker.DeviceMapping
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		switch {
		case e.IsDir() && dir == "/dev" && e.Name() != "pts" && e.Name() != "shm" && e.Name() != "mqueue":
			out = append(out, hostDevices(p)...)
		case e.Type()&os.ModeDevice != 0:
			out = append(out, libdocker.DeviceMapping{PathOnHost: p, PathInContainer: p, CgroupPermissions: "rwm"})
		}
	}
	return out
}
