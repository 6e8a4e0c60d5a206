package cgroups

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// UnitManager is the part of systemd's D-Bus API the systemd driver uses
// (go-systemd's *dbus.Conn).
type UnitManager interface {
	StartTransientUnitContext(ctx context.Context, name, mode string, props []sddbus.Property, done chan<- string) (int, error)
	StopUnitContext(ctx context.Context, name, mode string, done chan<- string) (int, error)
	SetUnitPropertiesContext(ctx context.Context, name string, runtime bool, props ...sddbus.Property) error
	ResetFailedUnitContext(ctx context.Context, name string) error
	GetManagerProperty(name string) (string, error)
}

// unitTimeout bounds the wait for systemd to start or stop a slice.
const unitTimeout = 30 * time.Second

// systemdDriver makes the kubelet's cgroups as systemd slices
// (kubepods.slice, kubepods-burstable.slice, ...), as libcontainer's systemd
// managers do for the kubelet: a transient slice unit per cgroup, with
// accounting on and the limits as unit properties, started and stopped
// through systemd. The same values are then written to the cgroup files (v1:
// also in the hierarchies systemd does not manage, cpuset and hugetlb), so
// that what a unit property cannot say is applied too.
type systemdDriver struct {
	fsBase
	units UnitManager
	v2    bool
	// quotaPeriod: systemd takes CPUQuotaPeriodUSec (version 242 and later).
	quotaPeriod bool
}

// NewSystemd is the systemd driver over the hierarchies of mounts, talking
// to systemd through units; systemd roots its slices at under (its own
// cgroup, Host.InitCgroup).
func NewSystemd(mounts Mounts, units UnitManager, under string) (Driver, error) {
	h, err := newHierarchy(mounts)
	if err != nil {
		return nil, err
	}
	d := &systemdDriver{fsBase: fsBase{h: h, kind: Systemd, under: under}, units: units, v2: mounts.Mode() == ModeV2}
	if v, err := units.GetManagerProperty("Version"); err == nil {
		d.quotaPeriod = systemdVersion(v) >= 242
	}
	return d, nil
}

// systemdVersion is the major version in systemd's Version property
// ("\"252.38-1~deb12u1\"", "\"v257\""), 0 when unreadable.
func systemdVersion(v string) int {
	v = strings.TrimPrefix(strings.Trim(v, `"`), "v")
	end := 0
	for end < len(v) && v[end] >= '0' && v[end] <= '9' {
		end++
	}
	n, _ := strconv.Atoi(v[:end])
	return n
}

// unit is n's slice unit and its parent slice ("-.slice" at the top).
func unit(n Name) (name, parent string) {
	p := n.ToSystemd()
	dir, base := path.Split(p)
	parent = "-.slice"
	if dir != "/" {
		parent = path.Base(dir)
	}
	return base, parent
}

// Create starts n's slice with r as its properties (a slice that exists is
// kept: the kubelet ensures its slices on every start), makes its directories
// in the hierarchies systemd leaves alone and writes r.
func (d *systemdDriver) Create(n Name, r *Resources) error {
	p := d.path(n)
	if len(n) == 0 {
		return d.h.set(p, r)
	}
	r, props := d.properties(r)
	name, parent := unit(n)
	props = append([]sddbus.Property{
		sddbus.PropDescription("kubelet cgroup " + name),
		sddbus.PropWants(parent),
		newProp("DefaultDependencies", false),
		newProp("MemoryAccounting", true),
		newProp("CPUAccounting", true),
		newProp("TasksAccounting", true),
		d.ioAccounting(),
	}, props...)
	if err := d.start(name, props); err != nil {
		return err
	}
	if err := d.h.create(p); err != nil {
		return err
	}
	return d.h.set(p, r)
}

func (d *systemdDriver) ioAccounting() sddbus.Property {
	if d.v2 {
		return newProp("IOAccounting", true)
	}
	return newProp("BlockIOAccounting", true)
}

// start starts the slice and waits for systemd's answer; a slice that exists
// gets the resource properties instead.
func (d *systemdDriver) start(name string, props []sddbus.Property) error {
	ctx, cancel := context.WithTimeout(context.Background(), unitTimeout)
	defer cancel()
	done := make(chan string, 1)
	if _, err := d.units.StartTransientUnitContext(ctx, name, "replace", props, done); err != nil {
		var derr dbus.Error
		if errors.As(err, &derr) && strings.HasSuffix(derr.Name, ".UnitExists") {
			return d.setProperties(ctx, name, resourceProps(props))
		}
		return fmt.Errorf("start slice %s: %w", name, err)
	}
	select {
	case res := <-done:
		if res != "done" {
			_ = d.units.ResetFailedUnitContext(ctx, name)
			return fmt.Errorf("start slice %s: systemd answered %q", name, res)
		}
		return nil
	case <-ctx.Done():
		_ = d.units.ResetFailedUnitContext(context.Background(), name)
		return fmt.Errorf("start slice %s: no answer from systemd within %v", name, unitTimeout)
	}
}

// resourceProps are the properties of props that a running slice can change.
func resourceProps(props []sddbus.Property) []sddbus.Property {
	var out []sddbus.Property
	for _, p := range props {
		switch p.Name {
		case "CPUShares", "CPUWeight", "CPUQuotaPerSecUSec", "CPUQuotaPeriodUSec", "MemoryLimit", "MemoryMax", "TasksMax":
			out = append(out, p)
		}
	}
	return out
}

func (d *systemdDriver) setProperties(ctx context.Context, name string, props []sddbus.Property) error {
	if len(props) == 0 {
		return nil
	}
	if err := d.units.SetUnitPropertiesContext(ctx, name, true, props...); err != nil {
		return fmt.Errorf("set properties of slice %s: %w", name, err)
	}
	return nil
}

// Update sets r's fields as the slice's properties and writes them.
func (d *systemdDriver) Update(n Name, r *Resources) error {
	p := d.path(n)
	if len(n) == 0 {
		return d.h.set(p, r)
	}
	r, props := d.properties(r)
	name, _ := unit(n)
	ctx, cancel := context.WithTimeout(context.Background(), unitTimeout)
	defer cancel()
	if err := d.setProperties(ctx, name, props); err != nil {
		return err
	}
	return d.h.set(p, r)
}

// Destroy kills what still runs in n (and below), stops its slice and
// removes what systemd left in the hierarchies it does not manage.
func (d *systemdDriver) Destroy(n Name) error {
	p := d.path(n)
	if err := d.killAll(p); err != nil {
		return err
	}
	name, _ := unit(n)
	ctx, cancel := context.WithTimeout(context.Background(), unitTimeout)
	defer cancel()
	done := make(chan string, 1)
	var errs []error
	if _, err := d.units.StopUnitContext(ctx, name, "replace", done); err != nil {
		var derr dbus.Error
		if !errors.As(err, &derr) || !strings.HasSuffix(derr.Name, ".NoSuchUnit") {
			errs = append(errs, fmt.Errorf("stop slice %s: %w", name, err))
		}
	} else {
		select {
		case <-done:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("stop slice %s: no answer from systemd within %v", name, unitTimeout))
		}
	}
	_ = d.units.ResetFailedUnitContext(ctx, name)
	return errors.Join(append(errs, d.removeAll(p))...)
}

// properties are r as slice properties, and r with the CPU quota rounded as
// systemd rounds it (to whole percents of a CPU: the cgroup files get the
// same value, so that children can have the quota they expect).
func (d *systemdDriver) properties(r *Resources) (*Resources, []sddbus.Property) {
	if r == nil {
		return nil, nil
	}
	out := *r
	var props []sddbus.Property
	if r.CPUShares != nil {
		if d.v2 {
			props = append(props, newProp("CPUWeight", CPUSharesToWeight(*r.CPUShares)))
		} else {
			props = append(props, newProp("CPUShares", *r.CPUShares))
		}
	}
	if r.CPUPeriod != nil && d.quotaPeriod {
		props = append(props, newProp("CPUQuotaPeriodUSec", *r.CPUPeriod))
	}
	if r.CPUQuota != nil {
		perSec := uint64(math.MaxUint64) // systemd's infinity
		if q := *r.CPUQuota; q > 0 {
			period := uint64(QuotaPeriod)
			if r.CPUPeriod != nil && *r.CPUPeriod > 0 {
				period = *r.CPUPeriod
			}
			perSec = uint64(q) * 1000000 / period
			if perSec%10000 != 0 {
				perSec = (perSec/10000 + 1) * 10000
				rounded := int64(perSec * period / 1000000)
				out.CPUQuota = &rounded
			}
		}
		props = append(props, newProp("CPUQuotaPerSecUSec", perSec))
	}
	if r.Memory != nil {
		name := "MemoryLimit"
		if d.v2 {
			name = "MemoryMax"
		}
		props = append(props, newProp(name, infinity(*r.Memory)))
	}
	if r.PidsLimit != nil {
		props = append(props, newProp("TasksMax", infinity(*r.PidsLimit)))
	}
	return &out, props
}

// infinity is v as a unit property: positive values as they are, others
// systemd's infinity.
func infinity(v int64) uint64 {
	if v > 0 {
		return uint64(v)
	}
	return math.MaxUint64
}

func newProp(name string, value any) sddbus.Property {
	return sddbus.Property{Name: name, Value: dbus.MakeVariant(value)}
}

// unifiedProps are the unit properties of the unified keys (CheckUnified),
// as runc's systemd manager sets them.
var unifiedProps = map[string]string{MemoryMin: "MemoryMin", MemoryLow: "MemoryLow", MemoryHigh: "MemoryHigh", MemorySwapMax: "MemorySwapMax"}

// UnifiedProperties are checked unified resources as systemd unit
// properties ("max": systemd's infinity). systemd writes a unit's cgroup
// files from its properties whenever it sets any of them, so a scope's
// unified resources must be its properties, not files written behind
// systemd's back, where a property exists. The keys of no property (a
// scope's memory.oom.group comes from its OOMPolicy, fixed when the scope
// is made) are returned as files, to be written into the cgroup after the
// properties are set, as runc does.
func UnifiedProperties(kv map[string]string) ([]sddbus.Property, map[string]string, error) {
	if err := CheckUnified(kv); err != nil {
		return nil, nil, err
	}
	props := make([]sddbus.Property, 0, len(kv))
	var files map[string]string
	for _, k := range sortedKeys(kv) {
		name, ok := unifiedProps[k]
		if !ok {
			if files == nil {
				files = map[string]string{}
			}
			files[k] = kv[k]
			continue
		}
		v := uint64(math.MaxUint64)
		if kv[k] != "max" {
			v, _ = strconv.ParseUint(kv[k], 10, 64)
		}
		props = append(props, newProp(name, v))
	}
	return props, files, nil
}
