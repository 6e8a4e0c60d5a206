package nodeshutdown

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// The logind and systemd D-Bus names the manager talks to.
const (
	logindService   = "org.freedesktop.login1"
	logindPath      = dbus.ObjectPath("/org/freedesktop/login1")
	logindInterface = "org.freedesktop.login1.Manager"

	systemdService   = "org.freedesktop.systemd1"
	systemdPath      = dbus.ObjectPath("/org/freedesktop/systemd1")
	systemdInterface = "org.freedesktop.systemd1.Manager"

	prepareForShutdown = "PrepareForShutdown"
)

// The logind drop-in the kubelet writes when InhibitDelayMaxSec is too small
// for the grace period (upstream's path and file name).
const (
	DefaultLogindConfDir = "/etc/systemd/logind.conf.d/"
	logindDropInName     = "99-kubelet.conf"
)

// The arguments of logind's Inhibit call: a delay lock on shutdown.
const (
	inhibitWhat = "shutdown"
	inhibitWho  = "kubelet"
	inhibitWhy  = "Kubelet needs time to handle node shutdown"
	inhibitMode = "delay"
)

// inhibitLock is the file descriptor logind hands out for an inhibitor;
// closing it releases the lock.
type inhibitLock struct {
	fd   int
	held bool
}

// logindConn is one connection to the system bus, used to talk to logind
// (and to systemd to reload logind).
type logindConn struct {
	conn    *dbus.Conn
	confDir string
}

// dialLogind connects to the bus at address, or to the system bus when
// address is empty (DBUS_SYSTEM_BUS_ADDRESS or the default socket).
func dialLogind(address, confDir string) (*logindConn, error) {
	where := address
	if where == "" {
		where = os.Getenv("DBUS_SYSTEM_BUS_ADDRESS")
	}
	if where == "" {
		where = "unix:path=/var/run/dbus/system_bus_socket"
	}
	conn, err := dbus.Connect(where)
	if err != nil {
		return nil, fmt.Errorf("unable to connect to the system bus at %s to reach logind: %w", where, err)
	}
	return &logindConn{conn: conn, confDir: confDir}, nil
}

func (l *logindConn) Close() error {
	return l.conn.Close()
}

// inhibitDelay reads logind's InhibitDelayMaxUSec, the longest a delay lock
// may hold a shutdown back.
func (l *logindConn) inhibitDelay(ctx context.Context) (time.Duration, error) {
	var v dbus.Variant
	err := l.conn.Object(logindService, logindPath).
		CallWithContext(ctx, "org.freedesktop.DBus.Properties.Get", 0, logindInterface, "InhibitDelayMaxUSec").
		Store(&v)
	if err != nil {
		return 0, fmt.Errorf("failed reading InhibitDelayMaxUSec property from logind: %w", err)
	}
	usec, ok := v.Value().(uint64)
	if !ok {
		return 0, errors.New("InhibitDelayMaxUSec from logind is not a uint64 as expected")
	}
	return time.Duration(usec) * time.Microsecond, nil
}

// inhibit takes a delay inhibitor lock on shutdown.
func (l *logindConn) inhibit(ctx context.Context) (inhibitLock, error) {
	call := l.conn.Object(logindService, logindPath).
		CallWithContext(ctx, logindInterface+".Inhibit", 0, inhibitWhat, inhibitWho, inhibitWhy, inhibitMode)
	if call.Err != nil {
		return inhibitLock{}, fmt.Errorf("failed creating systemd inhibitor: %w", call.Err)
	}
	var fd dbus.UnixFD
	if err := call.Store(&fd); err != nil {
		return inhibitLock{}, fmt.Errorf("failed storing inhibit lock file descriptor: %w", err)
	}
	return inhibitLock{fd: int(fd), held: true}, nil
}

// release closes the lock's descriptor, which lets the shutdown go on.
func releaseLock(lock *inhibitLock) error {
	if !lock.held {
		return nil
	}
	lock.held = false
	if err := os.NewFile(uintptr(lock.fd), "inhibit-lock").Close(); err != nil {
		return fmt.Errorf("unable to close systemd inhibitor lock: %w", err)
	}
	return nil
}

// reload makes logind re-read its configuration: systemd sends SIGHUP to
// every process of systemd-logind.service.
func (l *logindConn) reload(ctx context.Context) error {
	const sighup int32 = 1
	call := l.conn.Object(systemdService, systemdPath).
		CallWithContext(ctx, systemdInterface+".KillUnit", 0, "systemd-logind.service", "all", sighup)
	if call.Err != nil {
		return fmt.Errorf("unable to reload logind conf: %w", call.Err)
	}
	return nil
}

// overrideInhibitDelay writes the drop-in that raises InhibitDelayMaxSec to
// delay (whole seconds).
func (l *logindConn) overrideInhibitDelay(delay time.Duration) error {
	if err := os.MkdirAll(l.confDir, 0o755); err != nil {
		return fmt.Errorf("failed creating %v directory: %w", l.confDir, err)
	}
	content := fmt.Sprintf("# Kubelet logind override\n[Login]\nInhibitDelayMaxSec=%.0f\n", delay.Seconds())
	path := filepath.Join(l.confDir, logindDropInName)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		return fmt.Errorf("failed writing logind shutdown inhibit override file %v: %w", path, err)
	}
	return nil
}

// monitor subscribes to PrepareForShutdown. The returned channel carries the
// signal's argument (true: shutdown starts, false: it was cancelled) and is
// closed when the connection ends (or done is closed). onBad is told about
// malformed signals.
//
// Only logind's own signals count: the match names the sender, the unique
// bus name that owns org.freedesktop.login1 now, and each signal's sender is
// checked again (any local user may emit a signal on the system bus with
// logind's path and interface, and with it every pod would be killed). A
// logind that restarts gets a new unique name: the connection to it is made
// again (watch) and asks anew.
func (l *logindConn) monitor(done <-chan struct{}, onBad func(msg string)) (<-chan bool, error) {
	var owner string
	if err := l.conn.BusObject().Call("org.freedesktop.DBus.GetNameOwner", 0, logindService).Store(&owner); err != nil {
		return nil, fmt.Errorf("find the owner of %s: %w", logindService, err)
	}
	err := l.conn.AddMatchSignal(
		dbus.WithMatchSender(owner),
		dbus.WithMatchInterface(logindInterface),
		dbus.WithMatchMember(prepareForShutdown),
		dbus.WithMatchObjectPath(logindPath),
	)
	if err != nil {
		return nil, err
	}
	signals := make(chan *dbus.Signal, 4)
	l.conn.Signal(signals)
	events := make(chan bool, 1)
	go func() {
		defer close(events)
		defer logging.HandleCrash(nil, "logind signals")
		for sig := range signals {
			if sig == nil || sig.Sender != owner || sig.Name != logindInterface+"."+prepareForShutdown || sig.Path != logindPath {
				continue
			}
			if len(sig.Body) == 0 {
				onBad("Failed obtaining shutdown event, PrepareForShutdown event was empty")
				continue
			}
			active, ok := sig.Body[0].(bool)
			if !ok {
				onBad("Failed obtaining shutdown event, PrepareForShutdown event was not bool type as expected")
				continue
			}
			select {
			case events <- active:
			case <-done:
				return
			}
		}
	}()
	return events, nil
}
