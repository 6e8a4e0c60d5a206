package podsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podsource/manifest"
)

// settleDelay coalesces a burst of inotify events (an editor's write, rename, chmod) into
// one re-read.
const settleDelay = 100 * time.Millisecond

// fileSource reads ManifestPath: one manifest file, or every regular file of a directory
// whose name does not start with "." (not recursing). It re-reads everything on each
// inotify event of the path and every FileCheckFrequency.
type fileSource struct {
	path     string
	nodeName string
	decode   manifest.Options
	period   time.Duration
	logger   *zap.Logger
	out      *emitter

	watcher *fsnotify.Watcher // nil when inotify is unavailable
	watched string            // the directory being watched, "" = none
}

func newFileSource(s *Source) *fileSource {
	return &fileSource{
		path:     filepath.Clean(s.opts.ManifestPath),
		nodeName: s.opts.NodeName,
		decode:   s.opts.manifestOptions(),
		period:   s.opts.FileCheckFrequency,
		logger:   s.logger.With(zap.String("source", kubecontainer.FileSource), zap.String("path", s.opts.ManifestPath)),
		out:      newEmitter(s, kubecontainer.FileSource),
	}
}

func (f *fileSource) run(ctx context.Context) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		f.logger.Warn("Cannot watch the manifest path; relying on periodic re-reads", zap.Error(err))
	} else {
		f.watcher = w
		defer w.Close()
	}
	f.logger.Info("Watching pod manifests", zap.Duration("period", f.period))
	f.sync(ctx)

	ticker := time.NewTicker(f.period)
	defer ticker.Stop()
	settle := time.NewTimer(settleDelay)
	settle.Stop()
	defer settle.Stop()
	var events <-chan fsnotify.Event
	var watchErrs <-chan error
	if f.watcher != nil {
		events, watchErrs = f.watcher.Events, f.watcher.Errors
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			f.sync(ctx)
		case <-settle.C:
			f.sync(ctx)
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if f.relevant(ev) {
				settle.Reset(settleDelay)
			}
		case err, ok := <-watchErrs:
			if !ok {
				watchErrs = nil
				continue
			}
			f.logger.Warn("Watching the manifest path failed", zap.Error(err))
		}
	}
}

// sync (re)establishes the watch, reads the path and sends the state if it changed.
func (f *fileSource) sync(ctx context.Context) {
	f.ensureWatch()
	entries, problems, err := f.read()
	if err != nil {
		f.logger.Warn("Cannot read the manifest path; keeping the last state", zap.Error(err))
		return
	}
	f.out.emit(ctx, entries, problems)
}

// watchTarget is the directory to watch: the path itself when it is a directory, else
// its parent, so that a file created, replaced or removed later is noticed.
func (f *fileSource) watchTarget() string {
	if st, err := os.Stat(f.path); err == nil && st.IsDir() {
		return f.path
	}
	return filepath.Dir(f.path)
}

func (f *fileSource) ensureWatch() {
	if f.watcher == nil {
		return
	}
	target := f.watchTarget()
	if target == f.watched {
		return
	}
	if f.watched != "" {
		_ = f.watcher.Remove(f.watched) // gone already when the directory was removed
		f.watched = ""
	}
	if err := f.watcher.Add(target); err != nil {
		f.logger.Debug("Cannot watch directory yet; will retry", zap.String("dir", target), zap.Error(err))
		return
	}
	f.watched = target
}

// relevant reports whether an event may change the state. Removing the watched
// directory drops the watch so that the next sync re-adds it.
func (f *fileSource) relevant(ev fsnotify.Event) bool {
	name := filepath.Clean(ev.Name)
	if name == f.watched && ev.Has(fsnotify.Remove|fsnotify.Rename) {
		_ = f.watcher.Remove(f.watched)
		f.watched = ""
		return true
	}
	if f.watched != f.path {
		return name == f.path // watching the parent of a single manifest file
	}
	return filepath.Dir(name) == f.path && !strings.HasPrefix(filepath.Base(name), ".")
}

// read returns the pods of the path and the problems found per file. A path that does
// not exist is an empty state (as upstream); other errors keep the last state.
func (f *fileSource) read() ([]entry, map[string]string, error) {
	problems := map[string]string{}
	st, err := os.Stat(f.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, problems, nil
	case err != nil:
		return nil, nil, fmt.Errorf("stat manifest path: %w", err)
	case st.IsDir():
		entries, err := f.readDir(problems)
		return entries, problems, err
	case !st.Mode().IsRegular():
		return nil, nil, fmt.Errorf("manifest path %q is neither a directory nor a regular file", f.path)
	}
	entries, err := f.readFile(f.path)
	if err != nil {
		problems[f.path] = err.Error()
	}
	return entries, problems, nil
}

func (f *fileSource) readDir(problems map[string]string) ([]entry, error) {
	dirents, err := os.ReadDir(f.path) // sorted by name
	if err != nil {
		return nil, fmt.Errorf("read manifest directory: %w", err)
	}
	var entries []entry
	for _, d := range dirents {
		if strings.HasPrefix(d.Name(), ".") {
			continue
		}
		path := filepath.Join(f.path, d.Name())
		st, err := os.Stat(path) // follows symlinks
		switch {
		case err != nil:
			problems[path] = err.Error()
			continue
		case st.IsDir():
			continue // not recursing, as upstream
		case !st.Mode().IsRegular():
			problems[path] = fmt.Sprintf("%q is not a regular file", path)
			continue
		}
		got, err := f.readFile(path)
		if err != nil {
			problems[path] = err.Error()
			continue
		}
		entries = append(entries, got...)
	}
	return entries, nil
}

func (f *fileSource) readFile(path string) ([]entry, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open manifest: %w", err)
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, manifest.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read manifest %q: %w", path, err)
	}
	pods, err := manifest.Decode(data, path, f.nodeName, f.decode)
	if err != nil {
		return nil, err
	}
	entries := make([]entry, len(pods))
	for i, pod := range pods {
		entries[i] = entry{pod: pod, origin: path}
	}
	return entries, nil
}
