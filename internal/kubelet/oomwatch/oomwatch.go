// Package oomwatch is upstream's OOM watcher: it follows the kernel's OOM
// kills (internal/oomlog), records a SystemOOM event on the node for each
// system-wide one, and counts every kill by the name upstream gives it (the
// killed task's memory cgroup, "/" for a system-wide kill): the value of
// container_oom_events_total.
//
// As upstream's (cAdvisor's oomparser reads /dev/kmsg from its start), the
// kills the kernel log holds when the watcher starts are counted and
// reported too.
package oomwatch

import (
	"context"
	"fmt"
	"sync"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/kubelet-dockershim/kubelet/internal/lifecycle"
	"github.com/kubelet-dockershim/kubelet/internal/oomlog"
)

// Upstream's event reason and message.
const (
	EventSystemOOM  = "SystemOOM"
	systemOOMPrefix = "System OOM encountered"
)

// Options configure a Watcher.
type Options struct {
	Recorder record.EventRecorder
	NodeRef  *v1.ObjectReference
	Logger   *zap.Logger
	// Path is the kernel log; "" is /dev/kmsg.
	Path string
	// TolerateUnreadable lets Start succeed without a readable kernel log
	// (upstream: a kubelet in a user namespace with KubeletInUserNamespace,
	// where kernel.dmesg_restrict refuses /dev/kmsg); nothing is then
	// reported or counted.
	TolerateUnreadable bool
}

// Watcher is the OOM watcher. Count is safe for concurrent use.
type Watcher struct {
	opts   Options
	logger *zap.Logger
	loops  lifecycle.Loops

	mu     sync.Mutex
	counts map[string]uint64 // by upstream's name of the kill
}

// New returns a Watcher; it reads nothing until Start.
func New(opts Options) *Watcher {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Path == "" {
		opts.Path = oomlog.DevKmsg
	}
	return &Watcher{opts: opts, logger: opts.Logger, counts: map[string]uint64{}}
}

// Start reads the kernel log, reporting the kills it holds, and follows it
// until ctx ends. An unreadable log fails it (upstream's kubelet does not
// start), unless TolerateUnreadable.
func (w *Watcher) Start(ctx context.Context) error {
	l, err := oomlog.Open(w.opts.Path, oomlog.Options{Logger: w.logger, OnKill: w.observe})
	if err != nil {
		if w.opts.TolerateUnreadable {
			w.logger.Info("Failed to create an oomWatcher (running in UserNS, ignoring)", zap.Error(err))
			return nil
		}
		return fmt.Errorf("the OOM watcher: %w", err)
	}
	w.loops.Go(w.logger, "OOM watcher", func() {
		defer l.Close()
		if err := l.Run(ctx); err != nil {
			w.logger.Error("Unexpectedly stopped receiving OOM notifications", zap.Error(err))
		}
	})
	return nil
}

// Wait returns once the follower has ended.
func (w *Watcher) Wait() { w.loops.Wait() }

// Count is how many OOM kills the watcher saw of the cgroup of that name
// (a path from the root of the memory hierarchy, "/" for system-wide kills).
func (w *Watcher) Count(name string) uint64 {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts[name]
}

// observe counts a kill and reports a system-wide one (called by the log).
func (w *Watcher) observe(k oomlog.Kill) {
	w.mu.Lock()
	w.counts[k.Container()]++
	w.mu.Unlock()
	if !k.Global {
		return
	}
	msg := systemOOMPrefix
	if k.Task != "" && k.PID != 0 {
		msg = fmt.Sprintf("%s, victim process: %s, pid: %d", msg, k.Task, k.PID)
	}
	w.logger.Info("Got sys oom event", zap.String("victim", k.Task), zap.Int("pid", k.PID), zap.String("task-memcg", k.TaskMemcg))
	if w.opts.Recorder != nil && w.opts.NodeRef != nil {
		w.opts.Recorder.Eventf(w.opts.NodeRef, v1.EventTypeWarning, EventSystemOOM, "%s", msg)
	}
}
