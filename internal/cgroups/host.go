package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Host is the cgroup hierarchies as this process sees them through a proc
// filesystem: where they are mounted (<proc>/self/mountinfo, read once) and
// which cgroup a process is in (<proc>/<pid>/cgroup). The kubelet's stats and
// cgroup manager and the dockershim's container stats each hold one; nothing
// else reads mountinfo for cgroups.
type Host struct {
	proc string

	mu     sync.Mutex
	mounts *Mounts
}

// NewHost reads through procRoot ("/proc"; a fake tree in tests).
func NewHost(procRoot string) *Host { return &Host{proc: procRoot} }

// Mounts are the mounted hierarchies; a host without any gives ModeNone, not
// an error. They are read on first use and kept.
func (h *Host) Mounts() (Mounts, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mounts != nil {
		return *h.mounts, nil
	}
	f, err := os.Open(filepath.Join(h.proc, "self", "mountinfo"))
	if err != nil {
		return Mounts{}, fmt.Errorf("read cgroup mounts: %w", err)
	}
	defer f.Close()
	m, err := ParseMountinfo(f)
	if err != nil {
		return Mounts{}, err
	}
	h.mounts = &m
	return m, nil
}

// RootDirs are the root cgroup's directories: the mountpoints of the v1
// cpuacct and memory hierarchies and of the cgroup2 hierarchy, "" for what is
// not mounted. Mount roots do not matter: the root is the mountpoint itself.
type RootDirs struct {
	CPUAcct string
	Memory  string
	Unified string
}

// Root is where the root cgroup's figures are.
func (h *Host) Root() (RootDirs, error) {
	m, err := h.Mounts()
	if err != nil {
		return RootDirs{}, err
	}
	r := RootDirs{CPUAcct: m.V1["cpuacct"].Mountpoint, Memory: m.V1["memory"].Mountpoint}
	if m.V2 != nil {
		r.Unified = m.V2.Mountpoint
	}
	return r, nil
}

// Process is the directories of process pid's cgroup (Resolve); pid 0 is the
// calling process. A process that is gone matches ErrGone.
func (h *Host) Process(pid int) (Paths, error) {
	m, err := h.measurable()
	if err != nil {
		return Paths{}, err
	}
	name := "self"
	if pid != 0 {
		name = strconv.Itoa(pid)
	}
	f, err := os.Open(filepath.Join(h.proc, name, "cgroup"))
	if err != nil {
		return Paths{}, fmt.Errorf("%w: %w", ErrGone, err)
	}
	defer f.Close()
	p, err := ParseProcCgroup(f)
	if err != nil {
		return Paths{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	return Resolve(m, p)
}

// Named is the directories of the cgroup at path name ("/kubepods") in every
// hierarchy (Resolve, as if a process were in it).
func (h *Host) Named(name string) (Paths, error) {
	m, err := h.measurable()
	if err != nil {
		return Paths{}, err
	}
	return Resolve(m, ProcCgroup{V1: map[string]string{"memory": name, "cpuacct": name, "pids": name}, V2: name, HasV2: true})
}

// measurable are the mounts, which must hold at least one hierarchy for a
// cgroup to be measured.
func (h *Host) measurable() (Mounts, error) {
	m, err := h.Mounts()
	if err == nil && m.Mode() == ModeNone {
		err = errors.New("no cgroup hierarchy is mounted")
	}
	return m, err
}

// Cadvisor is the cgroup at path name in the hierarchies /metrics/cadvisor
// reads: the v1 ones when the memory controller is mounted as v1 (also on a
// hybrid host), else the cgroup2 one; ok is false when neither is mounted.
func (h *Host) Cadvisor(name string) (d CadvisorDirs, ok bool, err error) {
	m, err := h.Mounts()
	if err != nil {
		return CadvisorDirs{}, false, err
	}
	if _, ok := m.V1["memory"]; !ok {
		if m.V2 == nil {
			return CadvisorDirs{}, false, nil
		}
		return CadvisorDirs{Unified: m.V2.Path(name)}, true, nil
	}
	dir := func(controller string) string {
		if mt, ok := m.V1[controller]; ok {
			return mt.Path(name)
		}
		return ""
	}
	return CadvisorDirs{CPU: dir("cpu"), CPUAcct: dir("cpuacct"), Memory: dir("memory"), Blkio: dir("blkio")}, true, nil
}

// Exists reports whether the cgroup at path name exists: in the v1 memory
// hierarchy, else in the cgroup2 one.
func (h *Host) Exists(name string) bool {
	dir, err := h.listDir(name, "memory")
	if err != nil {
		return false
	}
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}

// Children are the names of the child cgroups of the cgroup at path name,
// unsorted. The kubelet and runc make every cgroup in every hierarchy, so they
// are read in the v1 hierarchy whose directories hold the fewest files (pids,
// then cpu, then memory), or the cgroup2 one. A cgroup that does not exist
// matches fs.ErrNotExist.
func (h *Host) Children(name string) ([]string, error) {
	dir, err := h.listDir(name, "pids", "cpu", "memory")
	if err != nil {
		return nil, err
	}
	return subdirs(dir)
}

// listDir is name's directory in the first of the v1 controllers mounted, else
// in the cgroup2 hierarchy.
func (h *Host) listDir(name string, controllers ...string) (string, error) {
	m, err := h.measurable()
	if err != nil {
		return "", err
	}
	for _, c := range controllers {
		if mt, ok := m.V1[c]; ok {
			return mt.Path(name), nil
		}
	}
	if m.V2 == nil {
		return "", fmt.Errorf("none of %v is mounted", controllers)
	}
	return m.V2.Path(name), nil
}

// subdirs lists the directories in dir, unsorted.
func subdirs(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// InitCgroup is the cgroup of PID 1 (systemd) without its "/init.scope": where
// systemd roots the slices it makes ("/" on a host; /docker/<id> in a node
// container that shares the host's cgroup namespace). libcontainer's systemd
// managers read a slice's files under it, and so does the systemd driver.
func (h *Host) InitCgroup() (string, error) {
	f, err := os.Open(filepath.Join(h.proc, "1", "cgroup"))
	if err != nil {
		return "", fmt.Errorf("read the init process's cgroup: %w", err)
	}
	defer f.Close()
	p, err := ParseProcCgroup(f)
	if err != nil {
		return "", fmt.Errorf("the init process's cgroup: %w", err)
	}
	init, ok := p.V1["name=systemd"]
	if !ok {
		init, ok = p.V2, p.HasV2
	}
	if !ok {
		return "", errors.New("the init process is in no systemd or unified cgroup")
	}
	init = strings.TrimSuffix(init, "/init.scope")
	if init == "" {
		init = "/"
	}
	return init, nil
}
