package nodeshutdown

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/prop"
)

// startBus runs a private dbus-daemon that lets anyone own any name and send
// anything, and returns its address. It is killed at cleanup.
func startBus(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "bus") // short: socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	address, _ := runBus(t, dir)
	return address
}

// runBus runs a dbus-daemon listening on dir/bus; stop kills it (and is
// also called at cleanup).
func runBus(t *testing.T, dir string) (address string, stop func()) {
	t.Helper()
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		t.Fatal("dbus-daemon is not installed (scripts/prepare-host.sh installs it)")
	}
	socket := filepath.Join(dir, "bus")
	_ = os.Remove(socket)
	config := fmt.Sprintf(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>custom</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
  </policy>
</busconfig>
`, socket)
	cfgPath := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(daemon, "--config-file="+cfgPath, "--print-address", "--nofork")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr // kept quiet: it warns that it cannot raise its fd limit here
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			_ = cmd.Wait()
		})
	}
	t.Cleanup(stop)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		t.Fatalf("dbus-daemon did not print its address: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(line), stop
}

// killUnitCall is one call of the fake systemd's KillUnit.
type killUnitCall struct {
	Unit, Who string
	Signal    int32
}

// fakeLock is one inhibitor lock the fake logind handed out.
type fakeLock struct {
	What, Who, Why, Mode string
	received             chan struct{} // closed once the manager's copy of the fd is open
	released             chan struct{} // closed when every copy of the fd is closed
}

// waitReceived waits until the manager holds the lock. Tests wait for it
// before anything may release the lock: the fake only watches for the
// release once it has seen the manager's copy.
func (l *fakeLock) waitReceived(t *testing.T) {
	t.Helper()
	select {
	case <-l.received:
	case <-time.After(5 * time.Second):
		t.Fatal("the manager never received the inhibitor lock")
	}
}

func (l *fakeLock) isReleased() bool {
	select {
	case <-l.released:
		return true
	default:
		return false
	}
}

// fakeLogind plays org.freedesktop.login1 (Inhibit, InhibitDelayMaxUSec,
// PrepareForShutdown) and org.freedesktop.systemd1 (KillUnit, which makes
// the fake logind read the kubelet's drop-in again) on a bus.
type fakeLogind struct {
	t       *testing.T
	conn    *dbus.Conn
	props   *prop.Properties
	confDir string

	mu           sync.Mutex
	locks        []*fakeLock
	kills        []killUnitCall
	ignoreReload bool // KillUnit does not apply the drop-in
}

func newFakeLogind(t *testing.T, address, confDir string, delay time.Duration) *fakeLogind {
	t.Helper()
	conn, err := dbus.Connect(address)
	if err != nil {
		t.Fatalf("connect the fake logind: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	f := &fakeLogind{t: t, conn: conn, confDir: confDir}
	if err := conn.Export(&fakeLogindManager{f}, logindPath, logindInterface); err != nil {
		t.Fatal(err)
	}
	if err := conn.Export(&fakeSystemdManager{f}, systemdPath, systemdInterface); err != nil {
		t.Fatal(err)
	}
	f.props, err = prop.Export(conn, logindPath, prop.Map{
		logindInterface: {
			"InhibitDelayMaxUSec": {Value: uint64(delay / time.Microsecond), Emit: prop.EmitFalse},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{logindService, systemdService} {
		reply, err := conn.RequestName(name, dbus.NameFlagDoNotQueue)
		if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
			t.Fatalf("request %s: %v (reply %v)", name, err, reply)
		}
	}
	return f
}

func (f *fakeLogind) delay() time.Duration {
	return time.Duration(f.props.GetMust(logindInterface, "InhibitDelayMaxUSec").(uint64)) * time.Microsecond
}

// setIgnoreReload makes KillUnit leave InhibitDelayMaxUSec alone.
func (f *fakeLogind) setIgnoreReload() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ignoreReload = true
}

func (f *fakeLogind) lockList() []*fakeLock {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*fakeLock(nil), f.locks...)
}

func (f *fakeLogind) killUnitCalls() []killUnitCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]killUnitCall(nil), f.kills...)
}

// prepareForShutdown emits logind's signal.
func (f *fakeLogind) prepareForShutdown(active bool) {
	f.t.Helper()
	if err := f.conn.Emit(logindPath, logindInterface+"."+prepareForShutdown, active); err != nil {
		f.t.Fatalf("emit PrepareForShutdown(%v): %v", active, err)
	}
}

type fakeLogindManager struct{ f *fakeLogind }

// Inhibit hands out the write end of a pipe. Once the receiver's copy shows
// up in this process (the manager runs in the test process), the fake drops
// its own copy and waits for EOF on the read end: that is the release.
func (m *fakeLogindManager) Inhibit(what, who, why, mode string) (dbus.UnixFD, *dbus.Error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, dbus.MakeFailedError(err)
	}
	lock := &fakeLock{What: what, Who: who, Why: why, Mode: mode, received: make(chan struct{}), released: make(chan struct{})}
	m.f.mu.Lock()
	m.f.locks = append(m.f.locks, lock)
	m.f.mu.Unlock()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(r.Fd()), &st); err != nil {
		return 0, dbus.MakeFailedError(err)
	}
	fd := dbus.UnixFD(w.Fd())
	go func() {
		defer close(lock.released)
		defer r.Close()
		// r and w are two links to the pipe; a third is the received copy.
		if waitFor(func() bool { return pipeLinks(st.Ino) >= 3 }, 5*time.Second) {
			close(lock.received)
		}
		w.Close()
		_, _ = io.Copy(io.Discard, r)
	}()
	return fd, nil
}

// pipeLinks counts this process's descriptors open on the pipe ino.
func pipeLinks(ino uint64) int {
	entries, _ := os.ReadDir("/proc/self/fd")
	want := "pipe:[" + strconv.FormatUint(ino, 10) + "]"
	n := 0
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == want {
			n++
		}
	}
	return n
}

type fakeSystemdManager struct{ f *fakeLogind }

// KillUnit records the call; a SIGHUP to logind makes the fake read the
// kubelet's drop-in, as logind would.
func (m *fakeSystemdManager) KillUnit(unit, who string, signal int32) *dbus.Error {
	f := m.f
	f.mu.Lock()
	f.kills = append(f.kills, killUnitCall{Unit: unit, Who: who, Signal: signal})
	ignore := f.ignoreReload
	f.mu.Unlock()
	if ignore || unit != "systemd-logind.service" || signal != int32(syscall.SIGHUP) {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(f.confDir, logindDropInName))
	if err != nil {
		return dbus.MakeFailedError(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "InhibitDelayMaxSec="); ok {
			sec, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return dbus.MakeFailedError(err)
			}
			f.props.SetMust(logindInterface, "InhibitDelayMaxUSec", sec*uint64(time.Second/time.Microsecond))
		}
	}
	return nil
}

// waitFor polls cond every few milliseconds until it holds or d passes.
func waitFor(cond func() bool, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}
