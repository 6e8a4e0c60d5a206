//go:build !linux

package containerlog

import "os"

// logDir is an open directory whose files are opened by name. Here it is an
// os.Root: links that stay below the directory are followed.
type logDir struct {
	r *os.Root
}

func openLogDir(r *os.Root, dir string) (*logDir, error) {
	sub, err := r.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &logDir{r: sub}, nil
}

func (d *logDir) open(name string, flag int, perm os.FileMode) (*os.File, error) {
	return d.r.OpenFile(name, flag, perm)
}

func (d *logDir) names() ([]string, error) {
	f, err := d.r.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

func (d *logDir) Close() error { return d.r.Close() }
