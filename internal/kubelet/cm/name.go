package cm

import (
	"fmt"
	"path"
	"strings"
)

// Driver is the kubelet's cgroup driver (--cgroup-driver): how a cgroup name
// becomes a path.
type Driver string

const (
	// DriverCgroupfs names cgroups by their path: /kubepods/burstable/pod<uid>.
	DriverCgroupfs Driver = "cgroupfs"
	// DriverSystemd names them as systemd slices:
	// /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice.
	DriverSystemd Driver = "systemd"
)

// CgroupName is a cgroup as its components, e.g. {"kubepods", "burstable",
// "pod<uid>"}; the empty name is the root. Components hold neither '/' nor
// '_' (the systemd driver turns '-' into '_', which must stay reversible).
type CgroupName []string

// NewCgroupName appends components to base (a copy).
func NewCgroupName(base CgroupName, components ...string) (CgroupName, error) {
	for _, c := range components {
		if c == "" || strings.ContainsAny(c, "/_") {
			return nil, fmt.Errorf("invalid cgroup name component %q: empty, or holds '/' or '_'", c)
		}
	}
	out := make(CgroupName, 0, len(base)+len(components))
	return append(append(out, base...), components...), nil
}

// ToCgroupfs is the cgroupfs path: "/" + the components joined by '/'.
func (n CgroupName) ToCgroupfs() string { return "/" + path.Join(n...) }

// ToSystemd is the systemd path: each component with '-' escaped to '_',
// joined by '-' with ".slice" appended, and expanded into its parents
// (/a.slice/a-b.slice/a-b-c.slice); the root is "/".
func (n CgroupName) ToSystemd() string {
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

// Name is the path of n under the driver.
func (d Driver) Name(n CgroupName) string {
	if d == DriverSystemd {
		return n.ToSystemd()
	}
	return n.ToCgroupfs()
}

// ParseCgroupfs turns a cgroupfs path ("/", "/foo/bar") into a name.
func ParseCgroupfs(p string) CgroupName {
	p = strings.Trim(path.Clean("/"+p), "/")
	if p == "" {
		return CgroupName{}
	}
	return strings.Split(p, "/")
}

// ParseSystemd turns a systemd slice path (or a slice name) into a name: the
// last slice, "a-b_c.slice", is {"a", "b-c"}.
func ParseSystemd(p string) (CgroupName, error) {
	base := path.Base(p)
	if base == "/" || base == "." || base == "-.slice" {
		return CgroupName{}, nil
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
func (d Driver) Parse(p string) (CgroupName, error) {
	if d == DriverSystemd {
		return ParseSystemd(p)
	}
	return ParseCgroupfs(p), nil
}
