package dockershim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sync"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
	"go.uber.org/zap"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
)

// CRI's unified resources (cgroup v2 files, the kubelet's MemoryQoS
// memory.min, memory.low and memory.high) have no Docker field: the shim
// keeps a container's in a label (labelUnified) and writes them into its
// cgroup once it runs, as containerd's runc does at creation; an update
// writes them into the running container's cgroup.

// checkUnifiedHost refuses unified resources on a cgroup v1 host.
func (s *Service) checkUnifiedHost(field string) error {
	if s.host.cgroupVersion != "2" {
		return invalidArg(field, "unified resources need cgroup v2; Docker reports cgroup version %q", s.host.cgroupVersion)
	}
	return nil
}

// applyUnifiedLabel writes a started container's labelled unified resources.
func (s *Service) applyUnifiedLabel(ctx context.Context, id, label string) error {
	var kv map[string]string
	if err := json.Unmarshal([]byte(label), &kv); err != nil {
		return fmt.Errorf("container %s: label %s: %w", id, labelUnified, err)
	}
	return s.setUnified(ctx, id, 0, kv)
}

// systemdUnits connects to systemd once, when the first container with
// unified resources runs under Docker's systemd driver.
type systemdUnits struct {
	once sync.Once
	conn *sddbus.Conn
	err  error
	// filesWarned: the caveat of keys written as files was logged.
	filesWarned sync.Once
}

func (u *systemdUnits) get() (*sddbus.Conn, error) {
	u.once.Do(func() {
		// The connection lives as long as the process.
		u.conn, u.err = sddbus.NewWithContext(context.Background())
	})
	return u.conn, u.err
}

// setUnified sets kv on running container id's cgroup. With Docker's
// systemd driver they are properties of its scope, docker-<id>.scope
// (systemd rewrites the files from them whenever the scope changes, a
// docker update included); with cgroupfs they are written into the cgroup2
// directory of its init process pid (0: asked of Docker). A container that
// exited meanwhile is no error.
//
// The keys systemd has no property for (memory.oom.group) are written into
// the scope's cgroup after its properties are set, as runc does; systemd
// puts its own value back whenever it applies the scope's properties (a
// docker update), and a container update writes them again.
func (s *Service) setUnified(ctx context.Context, id string, pid int, kv map[string]string) error {
	if s.host.cgroupDriver == "systemd" {
		files, err := s.setUnitUnified(id, "docker-"+id+".scope", kv)
		if err != nil || len(files) == 0 {
			return err
		}
		kv = files
	}
	if pid == 0 {
		j, err := s.docker.InspectContainer(ctx, id)
		if err != nil {
			return fmt.Errorf("inspect started container %s: %w", id, err)
		}
		if j.State == nil || !j.State.Running {
			return nil // it exited already: no cgroup to set
		}
		pid = j.State.Pid
	}
	p, err := s.stats.cgroups.lookup(pid)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // the process exited
	}
	if err != nil {
		return fmt.Errorf("container %s: find its cgroup: %w", id, err)
	}
	if !p.V2 {
		return fmt.Errorf("container %s: unified resources need cgroup v2, the container's cgroups are v1", id)
	}
	if err := cgroups.SetUnified(p.Unified, kv); err != nil && !errors.Is(err, cgroups.ErrGone) {
		return fmt.Errorf("container %s: %w", id, err)
	}
	return nil
}

// setUnitUnified sets kv as runtime properties of the container's scope,
// and returns the keys of no property (to be written as files). Before it
// returns such keys it waits until systemd has written the scope's cgroup
// from its properties: systemd applies a unit's properties to its cgroup in
// its main loop after answering, before it reads the next message, so the
// answer to a second call comes after those writes (which would otherwise
// undo the files written next, memory.oom.group among them).
func (s *Service) setUnitUnified(id, unit string, kv map[string]string) (map[string]string, error) {
	props, files, err := cgroups.UnifiedProperties(kv)
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", id, err)
	}
	conn, err := s.units.get()
	if err != nil {
		return nil, fmt.Errorf("container %s: connect to systemd: %w", id, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), unitTimeout)
	defer cancel()
	if len(props) > 0 {
		err = conn.SetUnitPropertiesContext(ctx, unit, true, props...)
		if noSuchUnit(err) {
			return nil, nil // the container exited and its scope is gone
		}
		if err != nil {
			return nil, fmt.Errorf("container %s: set %v on %s: %w", id, kv, unit, err)
		}
	}
	if len(files) == 0 {
		return nil, nil
	}
	if _, err := conn.GetUnitPropertyContext(ctx, unit, "ActiveState"); err != nil && !noSuchUnit(err) {
		return nil, fmt.Errorf("container %s: wait for systemd to apply %s: %w", id, unit, err)
	}
	s.units.filesWarned.Do(func() {
		s.logger.Warn("Docker's systemd cgroup driver: unified resources without a unit property are written into the container's scope, "+
			"and systemd puts its own value back whenever it applies the scope's properties again (a scope made by Docker cannot have OOMPolicy=kill); "+
			"the group OOM kill (memory.oom.group) holds until then. Docker's cgroupfs driver keeps it", zap.Strings("keys", slices.Sorted(maps.Keys(files))))
	})
	return files, nil
}

// noSuchUnit reports whether err is systemd's NoSuchUnit (godbus returns
// its errors as values; pointers are accepted too).
func noSuchUnit(err error) bool {
	const name = "org.freedesktop.systemd1.NoSuchUnit"
	var v godbus.Error
	var p *godbus.Error
	return errors.As(err, &v) && v.Name == name || errors.As(err, &p) && p != nil && p.Name == name
}

// unitTimeout bounds a call to systemd.
const unitTimeout = 30 * time.Second
