// Package pluginwatcher is the kubelet's plugin registration (pluginregistration
// v1): it watches <root>/plugins_registry (and the directories below it) for
// unix sockets, asks each new one GetInfo, hands the plugin to the handler of
// its type (CSIPlugin, ...), and tells the plugin the outcome with
// NotifyRegistrationStatus, with upstream's messages. A socket that goes away
// deregisters its plugin. Files whose names start with "." are ignored.
package pluginwatcher

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/kubelet-dockershim/kubelet/internal/lifecycle"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// DefaultDir is upstream's plugin registration directory.
const DefaultDir = "/var/lib/kubelet/plugins_registry"

// callTimeout bounds each call to a plugin's registration service.
const callTimeout = 10 * time.Second

// Handler registers the plugins of one type.
type Handler interface {
	// ValidatePlugin checks a plugin before it is registered.
	ValidatePlugin(name, endpoint string, versions []string) error
	// RegisterPlugin registers it (endpoint is where its own service is).
	RegisterPlugin(ctx context.Context, name, endpoint string, versions []string) error
	// DeRegisterPlugin forgets it.
	DeRegisterPlugin(name, endpoint string)
}

// Options configures a Watcher.
type Options struct {
	// Dir is watched; default DefaultDir.
	Dir string
	// Handlers by plugin type (registerapi.CSIPlugin, ...).
	Handlers map[string]Handler
	Logger   *zap.Logger
}

// Watcher registers the plugins whose sockets appear in Dir.
type Watcher struct {
	dir      string
	handlers map[string]Handler
	logger   *zap.Logger
	loops    lifecycle.Loops // what Start began

	mu         sync.Mutex
	registered map[string]registered // by socket path
}

type registered struct {
	typ, name, endpoint string
}

// New checks opts.
func New(opts Options) (*Watcher, error) {
	if opts.Dir == "" {
		opts.Dir = DefaultDir
	}
	if !filepath.IsAbs(opts.Dir) {
		return nil, fmt.Errorf("pluginwatcher: Dir %q must be absolute", opts.Dir)
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Watcher{dir: filepath.Clean(opts.Dir), handlers: opts.Handlers, logger: opts.Logger, registered: map[string]registered{}}, nil
}

// Start creates Dir, registers the sockets already there and watches for
// more until ctx ends.
func (w *Watcher) Start(ctx context.Context) error {
	if err := os.MkdirAll(w.dir, 0o750); err != nil {
		return fmt.Errorf("plugin registration directory: %w", err)
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", w.dir, err)
	}
	err = filepath.WalkDir(w.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return fw.Add(path)
		}
		w.found(ctx, path)
		return nil
	})
	if err != nil {
		_ = fw.Close()
		return fmt.Errorf("watch %s: %w", w.dir, err)
	}
	w.loops.Go(w.logger, "plugin registration watcher", func() {
		defer fw.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-fw.Events:
				if !ok {
					return
				}
				w.event(ctx, fw, ev)
			case err, ok := <-fw.Errors:
				if !ok {
					return
				}
				w.logger.Error("plugin registration watch", zap.Error(err))
			}
		}
	})
	w.logger.Info("Plugin registration watcher started", zap.String("dir", w.dir))
	return nil
}

// Wait returns once the loops Start began have ended (after ctx ended).
func (w *Watcher) Wait() { w.loops.Wait() }

func (w *Watcher) event(ctx context.Context, fw *fsnotify.Watcher, ev fsnotify.Event) {
	switch {
	case ev.Has(fsnotify.Create):
		fi, err := os.Lstat(ev.Name)
		if err != nil {
			return
		}
		if fi.IsDir() {
			if err := fw.Add(ev.Name); err != nil {
				w.logger.Error("watch a new plugin directory", zap.String("path", ev.Name), zap.Error(err))
			}
			return
		}
		w.found(ctx, ev.Name)
	case ev.Has(fsnotify.Remove), ev.Has(fsnotify.Rename):
		w.gone(ev.Name)
	}
}

// found registers the plugin of a new socket, in the background.
func (w *Watcher) found(ctx context.Context, path string) {
	if strings.HasPrefix(filepath.Base(path), ".") {
		return
	}
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return
	}
	go func() {
		defer logging.HandleCrash(w.logger, "plugin registration")
		w.registerRetrying(ctx, path)
	}()
}

// registerRetrying registers a socket's plugin, trying again (with back-off,
// as upstream's reconciler does) while its registration service does not
// answer and the socket is still there: a socket appears at bind(), before
// its server listens.
func (w *Watcher) registerRetrying(ctx context.Context, path string) {
	delay := 100 * time.Millisecond
	for {
		err := w.register(ctx, path)
		if err == nil {
			return
		}
		var unreachable *unreachableError
		if !errors.As(err, &unreachable) {
			w.logger.Error("Plugin registration failed", zap.String("socket", path), zap.Error(err))
			return
		}
		if _, statErr := os.Lstat(path); statErr != nil {
			return // gone meanwhile
		}
		w.logger.Debug("Plugin registration service not answering yet", zap.String("socket", path), zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// unreachableError is a registration service that did not answer GetInfo.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return e.err.Error() }

// register is upstream's RegisterPlugin operation for one socket.
func (w *Watcher) register(ctx context.Context, socket string) error {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("RegisterPlugin error -- dial failed at socket %s, err: %v", socket, err)
	}
	defer conn.Close()
	return w.registerWith(ctx, socket, registerapi.NewRegistrationClient(conn))
}

// registerWith registers the plugin whose registration service at socket
// client reaches: GetInfo, the handler of its type, then the outcome told
// back with NotifyRegistrationStatus.
func (w *Watcher) registerWith(ctx context.Context, socket string, client registerapi.RegistrationClient) error {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	info, err := client.GetInfo(cctx, &registerapi.InfoRequest{})
	cancel()
	if err != nil {
		return &unreachableError{fmt.Errorf("RegisterPlugin error -- failed to get plugin info using RPC GetInfo at socket %s, err: %v", socket, err)}
	}
	notify := func(ok bool, msg string) error {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		// The message may quote the socket's name, which need not be UTF-8;
		// protobuf would refuse to encode it and the plugin never hear.
		msg = strings.ToValidUTF8(msg, "\uFFFD")
		if _, err := client.NotifyRegistrationStatus(cctx, &registerapi.RegistrationStatus{PluginRegistered: ok, Error: msg}); err != nil {
			return fmt.Errorf("RegisterPlugin error -- failed to send registration status at socket %s, err: %v", socket, err)
		}
		return nil
	}
	h := w.handlers[info.Type]
	if h == nil {
		msg := fmt.Sprintf("RegisterPlugin error -- no handler registered for plugin type: %s at socket %s", info.Type, socket)
		return errors.Join(errors.New(msg), notify(false, msg))
	}
	endpoint := info.Endpoint
	if endpoint == "" {
		endpoint = socket // the plugin serves both services on one socket
	}
	if err := h.ValidatePlugin(info.Name, endpoint, info.SupportedVersions); err != nil {
		msg := fmt.Sprintf("RegisterPlugin error -- plugin validation failed with err: %v", err)
		return errors.Join(errors.New(msg), notify(false, msg))
	}
	if err := h.RegisterPlugin(ctx, info.Name, endpoint, info.SupportedVersions); err != nil {
		msg := fmt.Sprintf("RegisterPlugin error -- plugin registration failed with err: %v", err)
		return errors.Join(errors.New(msg), notify(false, msg))
	}
	w.mu.Lock()
	w.registered[socket] = registered{typ: info.Type, name: info.Name, endpoint: endpoint}
	w.mu.Unlock()
	w.logger.Info("Registered plugin", zap.String("type", info.Type), zap.String("name", info.Name), zap.String("endpoint", endpoint))
	return notify(true, "")
}

// gone deregisters the plugin of a socket that went away.
func (w *Watcher) gone(path string) {
	w.mu.Lock()
	r, ok := w.registered[path]
	delete(w.registered, path)
	w.mu.Unlock()
	if !ok {
		return
	}
	if h := w.handlers[r.typ]; h != nil {
		h.DeRegisterPlugin(r.name, r.endpoint)
	}
	w.logger.Info("Deregistered plugin", zap.String("type", r.typ), zap.String("name", r.name))
}
