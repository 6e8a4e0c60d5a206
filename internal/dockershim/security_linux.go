package dockershim

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// seccompOpt maps the CRI seccomp profile (or the deprecated path string) to a Docker
// security option. An unset profile means unconfined, as the CRI defines.
func seccompOpt(field string, p *runtimeapi.SecurityProfile, deprecated string) (string, error) {
	if p == nil && deprecated != "" {
		switch {
		case deprecated == "unconfined":
			p = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
		case deprecated == "runtime/default" || deprecated == "docker/default":
			p = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
		case strings.HasPrefix(deprecated, "localhost/"):
			p = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: strings.TrimPrefix(deprecated, "localhost/")}
		default:
			return "", invalidArg(field, "unknown seccomp profile %q", deprecated)
		}
	}
	if p == nil {
		return "seccomp=unconfined", nil // the CRI default
	}
	switch p.GetProfileType() {
	case runtimeapi.SecurityProfile_Unconfined:
		return "seccomp=unconfined", nil
	case runtimeapi.SecurityProfile_RuntimeDefault:
		return "", nil // Docker applies its default profile
	case runtimeapi.SecurityProfile_Localhost:
		b, err := readSeccompProfile(p.GetLocalhostRef())
		if err != nil {
			return "", invalidArg(field+".localhost_ref", "%v", err)
		}
		return "seccomp=" + string(b), nil
	}
	return "", invalidArg(field, "unknown seccomp profile type %v", p.GetProfileType())
}

// apparmorOpt maps the CRI AppArmor profile (or the deprecated string) to a Docker
// security option; unset leaves Docker's default.
func apparmorOpt(field string, p *runtimeapi.SecurityProfile, deprecated string) (string, error) {
	if p == nil && deprecated != "" {
		switch {
		case deprecated == "unconfined":
			p = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
		case deprecated == "runtime/default":
			p = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
		case strings.HasPrefix(deprecated, "localhost/"):
			p = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: strings.TrimPrefix(deprecated, "localhost/")}
		default:
			return "", invalidArg(field, "unknown apparmor profile %q", deprecated)
		}
	}
	switch {
	case p == nil:
		return "", nil
	case p.ProfileType == runtimeapi.SecurityProfile_Unconfined:
		return "apparmor=unconfined", nil
	case p.ProfileType == runtimeapi.SecurityProfile_RuntimeDefault:
		return "", nil
	case p.ProfileType == runtimeapi.SecurityProfile_Localhost:
		if p.LocalhostRef == "" {
			return "", invalidArg(field, "localhost profile needs a name")
		}
		return "apparmor=" + p.LocalhostRef, nil
	}
	return "", invalidArg(field, "unknown apparmor profile type %v", p.ProfileType)
}

// selinuxOpts maps SELinux options to Docker label options.
func selinuxOpts(o *runtimeapi.SELinuxOption) []string {
	if o == nil {
		return nil
	}
	var out []string
	for _, kv := range [][2]string{{"user", o.User}, {"role", o.Role}, {"type", o.Type}, {"level", o.Level}} {
		if kv[1] != "" {
			out = append(out, "label="+kv[0]+":"+kv[1])
		}
	}
	return out
}

// maxSeccompProfileSize caps a Localhost seccomp profile (Docker's own
// profile is ~20 KiB).
const maxSeccompProfileSize = 1 << 20

// readSeccompProfile reads the Localhost profile ref. As the CRI defines it,
// ref is a host path, anywhere (containerd and cri-dockerd read any; the
// kubelet puts its profiles under <root-dir>/seccomp, critest under /tmp): it
// must be absolute and clean, and name a regular file (symlinks on the way
// are followed, as a host path's may legitimately be) of at most
// maxSeccompProfileSize bytes. Anything else is refused unread: a FIFO would
// block the call (it is opened non-blocking, and a stat first keeps device
// nodes from being opened at all), a device or /proc file could be endless.
func readSeccompProfile(ref string) ([]byte, error) {
	if !filepath.IsAbs(ref) || filepath.Clean(ref) != ref {
		return nil, fmt.Errorf("profile %q: must be a clean absolute path", ref)
	}
	if fi, err := os.Stat(ref); err != nil {
		return nil, fmt.Errorf("profile %q: %w", ref, err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("profile %q: not a regular file (%v)", ref, fi.Mode().Type())
	}
	// O_CLOEXEC is added by os.OpenFile.
	f, err := os.OpenFile(ref, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("open profile %q: %w", ref, err)
	}
	defer f.Close()
	fi, err := f.Stat() // what was opened: the path may have changed since
	if err != nil {
		return nil, fmt.Errorf("stat profile %q: %w", ref, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("profile %q: not a regular file (%v)", ref, fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSeccompProfileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read profile %q: %w", ref, err)
	}
	if len(b) > maxSeccompProfileSize {
		return nil, fmt.Errorf("profile %q: larger than %d bytes", ref, maxSeccompProfileSize)
	}
	return b, nil
}

// securityInput is what both sandbox and container security contexts provide.
type securityInput struct {
	field               string
	seccomp, apparmor   *runtimeapi.SecurityProfile
	seccompPath, aaName string
	selinux             *runtimeapi.SELinuxOption
	noNewPrivs          bool
	privileged          bool
	runAsUser, runAsGrp *runtimeapi.Int64Value
	runAsUsername       string
	supplementalGroups  []int64
}

// securityOpts builds Docker's SecurityOpt list.
func securityOpts(in securityInput) ([]string, error) {
	var opts []string
	if !in.privileged {
		sc, err := seccompOpt(in.field+".seccomp", in.seccomp, in.seccompPath)
		if err != nil {
			return nil, err
		}
		if sc != "" {
			opts = append(opts, sc)
		}
		aa, err := apparmorOpt(in.field+".apparmor", in.apparmor, in.aaName)
		if err != nil {
			return nil, err
		}
		if aa != "" {
			opts = append(opts, aa)
		}
	}
	opts = append(opts, selinuxOpts(in.selinux)...)
	if in.noNewPrivs {
		opts = append(opts, "no-new-privileges")
	}
	return opts, nil
}

// dockerUser builds Docker's "user[:group]" string. A group without a user is refused,
// as the CRI requires.
func dockerUser(field string, uid *runtimeapi.Int64Value, username string, gid *runtimeapi.Int64Value) (string, error) {
	u := username
	if uid != nil {
		u = strconv.FormatInt(uid.Value, 10)
	}
	if gid != nil {
		if u == "" {
			return "", invalidArg(field+".run_as_group", "requires run_as_user or run_as_username")
		}
		u += ":" + strconv.FormatInt(gid.Value, 10)
	}
	return u, nil
}

// groupAdd converts supplemental group IDs for Docker.
func groupAdd(ids []int64) []string {
	out := make([]string, 0, len(ids))
	for _, g := range ids {
		out = append(out, strconv.FormatInt(g, 10))
	}
	return out
}

// sysctlsFor copies the sandbox sysctls, rejecting net.* ones with host networking.
func sysctlsFor(field string, sysctls map[string]string, hostNetwork bool) (map[string]string, error) {
	if len(sysctls) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(sysctls))
	for k, v := range sysctls {
		if hostNetwork && strings.HasPrefix(k, "net.") {
			return nil, invalidArg(field, "sysctl %q is not allowed with host networking", k)
		}
		out[k] = v
	}
	return out, nil
}

// nsModeString names a namespace mode for messages.
func nsModeString(m runtimeapi.NamespaceMode) string { return fmt.Sprint(m) }
