package cgroups

import (
	"fmt"
	"path"
	"strings"
)

// Kind is a cgroup driver's name (--cgroup-driver), which says how a cgroup
// name becomes a path.
type Kind string

const (
	// Cgroupfs names cgroups by their path: /kubepods/burstable/pod<uid>.
	Cgroupfs Kind = "cgroupfs"
	// Systemd names them as systemd slices:
	// /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice.
	Systemd Kind = "systemd"
)

// Name is a cgroup as its components, e.g. {"kubepods", "burstable",
// "pod<uid>"}; the empty name is the root. Components hold neither '/' nor
// '_' (the systemd driver turns '-' into '_', which must stay reversible).
type Name []string

// NewName appends components to base (a copy).
func NewName(base Name, components ...string) (Name, error) {
	for _, c := range components {
		if c == "" || strings.ContainsAny(c, "/_") {
			return nil, fmt.Errorf("invalid cgroup name component %q: empty, or holds '/' or '_'", c)
		}
	}
	out := make(Name, 0, len(base)+len(components))
	return append(append(out, base...), components...), nil
}

// ToCgroupfs is the cgroupfs path: "/" + the components joined by '/'.
func (n Name) ToCgroupfs() string { return "/" + path.Join(n...) }

// ToSystemd is the systemd path: each component with '-' escaped to '_',
// joined by '-' with ".slice" appended, and expanded into its parents
// (/a.slice/a-b.slice/a-b-c.slice); the root is "/".
func (n Name) ToSystemd() string {
	if len(n) == 0 {
		return "/"
	}
	escaped := make([]string, len(n))
	for i, c := range n {
		escaped[i] = strings.ReplaceAll(c, "-", "_")
	}
	var b strings.Builder
	prefix := ""
	for _, c := range escaped {
		prefix += c
		b.WriteString("/" + prefix + ".slice")
		prefix += "-"
	}
	return b.String()
}

// Path is the path of n under the driver.
func (d Kind) Path(n Name) string {
	if d == Systemd {
		return n.ToSystemd()
	}
	return n.ToCgroupfs()
}

// ParseCgroupfs turns a cgroupfs path ("/", "/foo/bar") into a name.
func ParseCgroupfs(p string) Name {
	p = strings.Trim(path.Clean("/"+p), "/")
	if p == "" {
		return Name{}
	}
	return strings.Split(p, "/")
}

// ParseSystemd turns a systemd slice path (or a slice name) into a name: the
// last slice, "a-b_c.slice", is {"a", "b-c"}.
func ParseSystemd(p string) (Name, error) {
	base := path.Base(p)
	if base == "/" || base == "." || base == "-.slice" {
		return Name{}, nil
	}
	unit, ok := strings.CutSuffix(base, ".slice")
	if !ok {
		return nil, fmt.Errorf("%q is not a systemd slice", p)
	}
	parts := strings.Split(unit, "-")
	for i, c := range parts {
		if c == "" {
			return nil, fmt.Errorf("%q is not a valid slice name: empty component", base)
		}
		parts[i] = strings.ReplaceAll(c, "_", "-")
	}
	return parts, nil
}

// Parse turns a path of the driver into a name.
func (d Kind) Parse(p string) (Name, error) {
	if d == Systemd {
		return ParseSystemd(p)
	}
	return ParseCgroupfs(p), nil
}

// PodUID is the pod UID a cgroup directory's name holds, for either driver:
// "pod<uid>" (cgroupfs) or "kubepods-burstable-pod<uid>.slice" (systemd, the
// UID's '-' escaped to '_'); ok is false for any other name.
func PodUID(dir string) (uid string, ok bool) {
	if uid, ok := strings.CutPrefix(dir, "pod"); ok && !strings.HasSuffix(dir, ".slice") {
		return uid, uid != ""
	}
	unit, ok := strings.CutSuffix(dir, ".slice")
	if !ok {
		return "", false
	}
	parts := strings.Split(unit, "-")
	uid, ok = strings.CutPrefix(parts[len(parts)-1], "pod")
	if !ok || uid == "" {
		return "", false
	}
	return strings.ReplaceAll(uid, "_", "-"), true
}

// ContainerID is the container ID a container cgroup directory's name holds:
// the name itself (cgroupfs), or the part between the runtime's prefix and
// ".scope" of a systemd scope ("docker-<id>.scope", "cri-containerd-<id>.scope",
// "crio-<id>.scope").
func ContainerID(dir string) string {
	unit, ok := strings.CutSuffix(dir, ".scope")
	if !ok {
		return dir
	}
	if i := strings.LastIndexByte(unit, '-'); i >= 0 {
		return unit[i+1:]
	}
	return unit
}
