package containerlog

import (
	"fmt"
	"os"
	"path/filepath"
)

// logLocation is where a log file is: root, a directory trusted as a whole,
// dir, the file's directory below root ("." for root itself), and base, its
// name. Everything below root is reached through an os.Root opened on it and
// then one component at a time without following symbolic links
// (openLogDir), so a link put in place of a pod's log directory cannot lead
// the shim's writes, truncations or creations out of the root.
type logLocation struct {
	root, dir, base string
}

// locate splits path at the first of roots it is below (the log root
// first), or else at its own directory.
func locate(path string, roots ...string) logLocation {
	for _, root := range roots {
		if root == "" {
			continue
		}
		if rel, err := filepath.Rel(root, path); err == nil && filepath.IsLocal(rel) {
			return logLocation{root: root, dir: filepath.Dir(rel), base: filepath.Base(rel)}
		}
	}
	return logLocation{root: filepath.Dir(path), dir: ".", base: filepath.Base(path)}
}

// openDir opens the file's directory; with create it first creates the root
// and the directories below it that are missing.
func (l logLocation) openDir(create bool) (*logDir, error) {
	if create {
		if err := os.MkdirAll(l.root, 0o755); err != nil {
			return nil, fmt.Errorf("create log root: %w", err)
		}
	}
	r, err := os.OpenRoot(l.root)
	if err != nil {
		return nil, fmt.Errorf("open log root: %w", err)
	}
	defer r.Close()
	if create {
		if err := r.MkdirAll(l.dir, 0o755); err != nil {
			return nil, fmt.Errorf("create log directory: %w", err)
		}
	}
	d, err := openLogDir(r, l.dir)
	if err != nil {
		return nil, fmt.Errorf("open log directory: %w", err)
	}
	return d, nil
}

// CreateLogFile creates the CRI log file at path (0640) and its missing
// directories, unless it exists, before the container starts: a reader may
// open it before the copier wrote a line. It is reached as a copier reaches
// it: below the log root through an os.Root opened on the log root,
// following no symbolic link; a path outside the log root below dir (the
// sandbox's log directory) when it is in dir, else below its own directory.
func (m *Manager) CreateLogFile(dir, path string) error {
	l := locate(path, m.logRoot, dir)
	d, err := l.openDir(true)
	if err != nil {
		return fmt.Errorf("containerlog: create %s: %w", path, err)
	}
	defer d.Close()
	f, err := openLog(d, l.base)
	if err != nil {
		return fmt.Errorf("containerlog: create %s: %w", path, err)
	}
	return f.Close()
}
