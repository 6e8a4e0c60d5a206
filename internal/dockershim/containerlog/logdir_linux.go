package containerlog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// logDir is an open directory whose files are opened by name, never through
// a symbolic link.
type logDir struct {
	f *os.File
}

// openLogDir opens dir below r one component at a time, refusing a symbolic
// link anywhere on the way: os.Root alone would follow a link that stays
// below r, into another pod's log directory.
func openLogDir(r *os.Root, dir string) (*logDir, error) {
	f, err := r.Open(".")
	if err != nil {
		return nil, err
	}
	d := &logDir{f: f}
	if dir == "." {
		return d, nil
	}
	for _, name := range strings.Split(dir, string(filepath.Separator)) {
		next, err := d.open(name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		d.Close()
		if err != nil {
			return nil, err
		}
		d = &logDir{f: next}
	}
	return d, nil
}

// open opens name in d with flag plus O_NOFOLLOW: a symbolic link at name is
// refused (ELOOP), not followed.
func (d *logDir) open(name string, flag int, perm os.FileMode) (*os.File, error) {
	path := filepath.Join(d.f.Name(), name)
	rc, err := d.f.SyscallConn()
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: path, Err: err}
	}
	fd := -1
	var oerr error
	cerr := rc.Control(func(dfd uintptr) {
		for {
			fd, oerr = unix.Openat(int(dfd), name, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
			if !errors.Is(oerr, unix.EINTR) {
				return
			}
		}
	})
	if cerr != nil {
		oerr = cerr
	}
	if oerr != nil {
		return nil, &os.PathError{Op: "openat", Path: path, Err: oerr}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// names lists the directory's entries.
func (d *logDir) names() ([]string, error) {
	f, err := d.open(".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

func (d *logDir) Close() error { return d.f.Close() }
