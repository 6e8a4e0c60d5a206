package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kubelet-dockershim/kubelet/internal/procfs"
)

// Mode is the cgroup layout of a host (of a mount namespace).
type Mode int

const (
	// ModeNone: no cgroup hierarchy is mounted.
	ModeNone Mode = iota
	// ModeV1: v1 hierarchies only, one per controller (or group of controllers).
	ModeV1
	// ModeHybrid: v1 controller hierarchies plus a cgroup2 mount (systemd's hybrid
	// layout, usually at /sys/fs/cgroup/unified). The controllers live in v1.
	ModeHybrid
	// ModeV2: one unified cgroup2 hierarchy (named v1 hierarchies such as
	// name=systemd may also be mounted; they hold no controller).
	ModeV2
)

func (m Mode) String() string {
	switch m {
	case ModeNone:
		return "none"
	case ModeV1:
		return "v1"
	case ModeHybrid:
		return "hybrid"
	case ModeV2:
		return "v2"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// Mount is one mounted cgroup hierarchy.
type Mount struct {
	// Root is the cgroup path at the root of the mount: "/" on a host, a deeper path
	// inside a container or a cgroup namespace.
	Root string
	// Mountpoint is where the hierarchy is mounted.
	Mountpoint string
}

// Path maps a cgroup path (as /proc/<pid>/cgroup lists it) to its directory under the
// mount, dropping the mount's root when the path lies below it.
func (m Mount) Path(cgroup string) string {
	rel := cgroup
	if root := strings.TrimSuffix(m.Root, "/"); root != "" {
		if r, ok := strings.CutPrefix(cgroup, root); ok && (r == "" || r[0] == '/') {
			rel = r
		}
	}
	return filepath.Join(m.Mountpoint, rel)
}

// Mounts are the cgroup hierarchies of a mount namespace. The first mount of each
// hierarchy wins.
type Mounts struct {
	// V1 maps each v1 controller ("cpuacct", "memory", "pids", ...) and named
	// hierarchy ("name=systemd") to its mount.
	V1 map[string]Mount
	// V2 is the cgroup2 mount, nil when there is none.
	V2 *Mount
}

// Mode tells the layout: v1 controllers with or without a cgroup2 mount, cgroup2 alone,
// or nothing.
func (m Mounts) Mode() Mode {
	controllers := false
	for name := range m.V1 {
		if !strings.HasPrefix(name, "name=") {
			controllers = true
			break
		}
	}
	switch {
	case m.V2 != nil && controllers:
		return ModeHybrid
	case m.V2 != nil:
		return ModeV2
	case len(m.V1) > 0:
		return ModeV1
	}
	return ModeNone
}

// ParseMountinfo reads the cgroup mounts out of a mountinfo file (/proc/self/mountinfo).
// Fields are "id parent major:minor root mountpoint options [optional...] - fstype
// source super-options". A file without cgroup mounts gives ModeNone, not an error.
func ParseMountinfo(r io.Reader) (Mounts, error) {
	m := Mounts{V1: map[string]Mount{}}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || len(fields) < sep+4 {
			continue
		}
		mnt := Mount{Root: procfs.UnescapeMountinfo(fields[3]), Mountpoint: procfs.UnescapeMountinfo(fields[4])}
		switch fields[sep+1] {
		case "cgroup2":
			if m.V2 == nil {
				m.V2 = &mnt
			}
		case "cgroup":
			for _, opt := range strings.Split(fields[sep+3], ",") {
				if _, seen := m.V1[opt]; !seen && opt != "rw" && opt != "ro" {
					m.V1[opt] = mnt
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return m, fmt.Errorf("read mountinfo: %w", err)
	}
	return m, nil
}

// ProcCgroup is a parsed /proc/<pid>/cgroup.
type ProcCgroup struct {
	// V1 maps v1 controllers (and named hierarchies) to the process's cgroup path.
	V1 map[string]string
	// V2 is the process's cgroup2 path, when HasV2.
	V2    string
	HasV2 bool
}

// ParseProcCgroup parses the lines "hierarchy-id:controllers:path" of /proc/<pid>/cgroup.
func ParseProcCgroup(r io.Reader) (ProcCgroup, error) {
	p := ProcCgroup{V1: map[string]string{}}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			p.V2, p.HasV2 = parts[2], true
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			p.V1[c] = parts[2]
		}
	}
	if err := sc.Err(); err != nil {
		return p, fmt.Errorf("read proc cgroup: %w", err)
	}
	if len(p.V1) == 0 && !p.HasV2 {
		return p, errors.New("no cgroup listed")
	}
	return p, nil
}

// Paths are the directories one cgroup's figures are read from. With V2 set only
// Unified is used; otherwise each v1 controller has its own directory ("" when the
// controller is not mounted).
type Paths struct {
	V2      bool
	Unified string
	CPUAcct string
	Memory  string
	Pids    string
}

// Resolve joins a process's cgroup paths with the mounts. The v1 hierarchies win when
// the memory controller is mounted as v1 (v1 and hybrid hosts keep their controllers
// there); otherwise the process's cgroup2 directory is used.
func Resolve(m Mounts, p ProcCgroup) (Paths, error) {
	if mm, ok := m.V1["memory"]; ok {
		memory, ok := p.V1["memory"]
		if !ok {
			return Paths{}, errors.New("process has no v1 memory cgroup")
		}
		out := Paths{Memory: mm.Path(memory)}
		if cm, ok := m.V1["cpuacct"]; ok && p.V1["cpuacct"] != "" {
			out.CPUAcct = cm.Path(p.V1["cpuacct"])
		}
		if pm, ok := m.V1["pids"]; ok && p.V1["pids"] != "" {
			out.Pids = pm.Path(p.V1["pids"])
		}
		return out, nil
	}
	if m.V2 != nil && p.HasV2 {
		return Paths{V2: true, Unified: m.V2.Path(p.V2)}, nil
	}
	return Paths{}, errors.New("no usable cgroup hierarchy for the process")
}

// Parent returns the directories one level up (a container's pod cgroup).
func (p Paths) Parent() Paths {
	up := func(s string) string {
		if s == "" {
			return ""
		}
		return filepath.Dir(s)
	}
	return Paths{V2: p.V2, Unified: up(p.Unified), CPUAcct: up(p.CPUAcct), Memory: up(p.Memory), Pids: up(p.Pids)}
}
