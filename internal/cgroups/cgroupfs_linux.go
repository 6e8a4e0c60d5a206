package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// hierarchy is one cgroup version's files, by cgroupfs path
// ("/kubepods/burstable/pod<uid>").
type hierarchy interface {
	// mountpoints are the distinct mountpoints a cgroup lives in, in a fixed
	// order (v1: cpu and cpuacct share one on most hosts).
	mountpoints() []string
	exists(path string) bool
	validate(path string, n Name) error
	create(path string) error
	set(path string, r *Resources) error
	clearMemoryProtection(path string) error
	// childDir is the directory whose subdirectories are path's children.
	childDir(path string) string
	read(path string) (Applied, error)
}

// fsBase is what both drivers do through the cgroup filesystem, once a
// name is a path (by the driver's Kind): checks, reads, listing, and the
// removal of what is left.
type fsBase struct {
	h    hierarchy
	kind Kind
	// under is the cgroup the names are below in the hierarchies ("" for the
	// root): the systemd driver's are below PID 1's cgroup.
	under string
}

// newHierarchy is v2 when the unified hierarchy is all there is, else v1 (cpu
// and memory must be mounted).
func newHierarchy(mounts Mounts) (hierarchy, error) {
	switch mounts.Mode() {
	case ModeV2:
		return v2fs{root: mounts.V2.Mountpoint}, nil
	case ModeV1, ModeHybrid:
		return newV1fs(mounts)
	}
	return nil, errors.New("no cgroup hierarchy is mounted")
}

func (b *fsBase) Kind() Kind { return b.kind }

func (b *fsBase) path(n Name) string {
	if b.under == "" || b.under == "/" {
		return b.kind.Path(n)
	}
	return path.Join(b.under, b.kind.Path(n))
}

func (b *fsBase) Dir(n Name) string { return b.path(n) }

func (b *fsBase) Exists(n Name) bool { return b.h.exists(b.path(n)) }

func (b *fsBase) Validate(n Name) error { return b.h.validate(b.path(n), n) }

func (b *fsBase) ClearMemoryProtection(n Name) error {
	return b.h.clearMemoryProtection(b.path(n))
}

func (b *fsBase) Read(n Name) (Applied, error) { return b.h.read(b.path(n)) }

func (b *fsBase) Children(n Name) ([]string, error) {
	out, err := subdirs(b.h.childDir(b.path(n)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return out, err
}

// cgroupfsDriver writes cgroups straight into the cgroup filesystem, v1 (or
// the controllers of a hybrid host) or v2, as libcontainer's fs managers do
// for the kubelet.
type cgroupfsDriver struct{ fsBase }

// NewCgroupfs is the cgroupfs driver over the hierarchies of mounts: v2 when
// the unified hierarchy is all there is, else v1 (cpu and memory must be
// mounted).
func NewCgroupfs(mounts Mounts) (Driver, error) {
	h, err := newHierarchy(mounts)
	if err != nil {
		return nil, err
	}
	return &cgroupfsDriver{fsBase{h: h, kind: Cgroupfs}}, nil
}

func (d *cgroupfsDriver) Create(n Name, r *Resources) error {
	p := d.path(n)
	if err := d.h.create(p); err != nil {
		return err
	}
	return d.h.set(p, r)
}

func (d *cgroupfsDriver) Update(n Name, r *Resources) error { return d.h.set(d.path(n), r) }

// Destroy kills what still runs in n (and below), then removes it from every
// hierarchy.
func (d *cgroupfsDriver) Destroy(n Name) error {
	path := d.path(n)
	if err := d.killAll(path); err != nil {
		return err
	}
	return d.removeAll(path)
}

// killAll kills what still runs in path (and below) in rounds of SIGKILL; the
// root is refused.
func (b *fsBase) killAll(path string) error {
	if strings.Trim(path, "/") == "" {
		return errors.New("refusing to destroy the root cgroup")
	}
	for round := 0; ; round++ {
		pids := b.pids(path)
		if len(pids) == 0 {
			return nil
		}
		if round == 5 {
			return fmt.Errorf("cgroup %s: processes %v survive SIGKILL", path, pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeAll removes path from every hierarchy, deepest first.
func (b *fsBase) removeAll(path string) error {
	var errs []error
	for _, mp := range b.h.mountpoints() {
		errs = append(errs, removeTree(filepath.Join(mp, path)))
	}
	return errors.Join(errs...)
}

// pids lists the processes of path and its descendants in every hierarchy.
func (b *fsBase) pids(path string) []int {
	var out []int
	for _, mp := range b.h.mountpoints() {
		_ = filepath.WalkDir(filepath.Join(mp, path), func(p string, e fs.DirEntry, err error) error {
			if err != nil || !e.IsDir() {
				return nil
			}
			b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, l := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(l); err == nil && !slices.Contains(out, pid) {
					out = append(out, pid)
				}
			}
			return nil
		})
	}
	return out
}

// removeTree removes the cgroup directory dir and its children, deepest
// first (a cgroup directory is removed with rmdir, its files go with it).
func removeTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	return nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// limitString is v as a limit: positive values as they are, others unlimited.
func limitString(v int64, unlimited string) string {
	if v > 0 {
		return strconv.FormatInt(v, 10)
	}
	return unlimited
}

func writeFile(dir, name, value string) error {
	if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0o644); err != nil {
		return fmt.Errorf("write %s to %s: %w", value, filepath.Join(dir, name), err)
	}
	return nil
}

// readLimit reads a file holding one integer, "max" being -1.
func readLimit(dir, name string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return -1, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// splitPath are the components of a cgroupfs path.
func splitPath(path string) []string {
	var out []string
	for _, c := range strings.Split(strings.Trim(path, "/"), "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

// AddProcess puts process pid into the cgroup at path (a cgroupfs path,
// whatever the driver; created where missing) in every hierarchy of
// mounts, the unified one of a hybrid host too, as libcontainer's Apply
// does for upstream's kubelet cgroup (kubeletCgroups). A hierarchy whose
// cgroup already lists pid is left alone. On cgroup v2 the controllers are
// enabled on the way down where they can be, as runc does: the cgroup
// holds the process whatever the parents allow.
func AddProcess(mounts Mounts, path string, pid int) error {
	h, err := newHierarchy(mounts)
	if err != nil {
		return err
	}
	dirs := h.mountpoints()
	if err := h.create(path); err != nil {
		if mounts.Mode() != ModeV2 {
			return err
		}
		if err := os.MkdirAll(filepath.Join(mounts.V2.Mountpoint, path), 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", filepath.Join(mounts.V2.Mountpoint, path), err)
		}
	}
	if mounts.Mode() == ModeHybrid && mounts.V2 != nil {
		if err := os.MkdirAll(filepath.Join(mounts.V2.Mountpoint, path), 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", filepath.Join(mounts.V2.Mountpoint, path), err)
		}
		dirs = append(dirs, mounts.V2.Mountpoint)
	}
	want := strconv.Itoa(pid)
	for _, mp := range dirs {
		dir := filepath.Join(mp, path)
		if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil && slices.Contains(strings.Fields(string(b)), want) {
			continue
		}
		if err := writeFile(dir, "cgroup.procs", want); err != nil {
			return err
		}
	}
	return nil
}
