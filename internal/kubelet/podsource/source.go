package podsource

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podsource/manifest"
	"github.com/kubelet-dockershim/kubelet/internal/lifecycle"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// Default check periods (upstream --file-check-frequency and --http-check-frequency).
const (
	DefaultFileCheckFrequency = 20 * time.Second
	DefaultHTTPCheckFrequency = 20 * time.Second
)

// updatesBuffer is the capacity of the Updates channel (upstream uses 50).
const updatesBuffer = 50

// Options configures the pod sources.
type Options struct {
	// NodeName is appended to every static pod name and is the static pods' spec.nodeName;
	// the API source watches the pods bound to it. Required.
	NodeName string
	// ManifestPath is a manifest file or a directory of them (--pod-manifest-path); "" = off.
	ManifestPath string
	// FileCheckFrequency is the period of full re-reads of ManifestPath; changes are also
	// picked up at once through inotify. Default 20s.
	FileCheckFrequency time.Duration
	// ManifestURL is polled for a Pod or a PodList (--manifest-url); "" = off.
	ManifestURL string
	// ManifestURLHeaders are sent with every request to ManifestURL.
	ManifestURLHeaders http.Header
	// HTTPCheckFrequency is the polling period of ManifestURL. Default 20s.
	HTTPCheckFrequency time.Duration
	// Logger defaults to zap.NewNop().
	Logger *zap.Logger
	// Recorder, if set, receives a Warning event for each manifest that cannot be used.
	Recorder record.EventRecorder
	// Client is the API server client of the API source, which watches the pods bound to
	// NodeName; nil = no API source (standalone).
	Client kubernetes.Interface
	// NodeSynced, if set, gates the API source: it starts watching only once this returns
	// true (polled every second), as upstream waits for the Node object before watching
	// pods. nil = watch at once.
	NodeSynced func() bool
	// Watched, if set, is given every pod of each update of the API source
	// as the watch delivered it, with the time it arrived (the pod start SLI
	// ends when the watch shows the pod started).
	Watched WatchObserver
	// RefuseRestartAllContainers is the RestartAllContainersOnContainerExits
	// gate off: static pods with a RestartAllContainers restart rule are
	// refused, as the API server refuses such pods.
	RefuseRestartAllContainers bool
}

// manifestOptions are the gates static pod manifests are validated with.
func (o Options) manifestOptions() manifest.Options {
	return manifest.Options{RefuseRestartAllContainers: o.RefuseRestartAllContainers}
}

// WatchObserver learns the API source's pods as they arrive.
type WatchObserver interface {
	ObservedPodsOnWatch(pods []*v1.Pod, when time.Time)
}

// Source runs the configured pod sources and merges them into one stream.
type Source struct {
	opts    Options
	logger  *zap.Logger
	loops   lifecycle.Loops // what Start began
	updates chan kubecontainer.PodUpdate

	mu   sync.Mutex
	seen map[string]bool // source name -> first state delivered
}

// New checks the options and wires the sources; nothing runs until Run.
func New(opts Options) (*Source, error) {
	if opts.NodeName == "" {
		return nil, errors.New("podsource: NodeName is required")
	}
	if opts.ManifestURL != "" {
		u, err := url.Parse(opts.ManifestURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("podsource: manifest URL %q must be an absolute http or https URL", opts.ManifestURL)
		}
	}
	if opts.FileCheckFrequency <= 0 {
		opts.FileCheckFrequency = DefaultFileCheckFrequency
	}
	if opts.HTTPCheckFrequency <= 0 {
		opts.HTTPCheckFrequency = DefaultHTTPCheckFrequency
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	s := &Source{
		opts:    opts,
		logger:  opts.Logger.Named("podsource"),
		updates: make(chan kubecontainer.PodUpdate, updatesBuffer),
		seen:    map[string]bool{},
	}
	if opts.ManifestPath != "" {
		s.seen[kubecontainer.FileSource] = false
	}
	if opts.ManifestURL != "" {
		s.seen[kubecontainer.HTTPSource] = false
	}
	if opts.Client != nil {
		s.seen[kubecontainer.APISource] = false
	}
	return s, nil
}

// Start reads the sources in the background until ctx ends (Wait waits for it).
func (s *Source) Start(ctx context.Context) error {
	s.loops.Go(s.logger, "pod sources", func() { s.run(ctx) })
	return nil
}

// Wait returns once the loop Start began has ended.
func (s *Source) Wait() { s.loops.Wait() }

// run reads the sources until ctx ends, sending on Updates. Each source sends SET with its
// full state: first at start (the API source: after its first list), even when empty,
// then whenever its pods changed. It returns when every source stopped;
// Updates is never closed.
func (s *Source) run(ctx context.Context) {
	var wg sync.WaitGroup
	if s.opts.ManifestPath != "" {
		f := newFileSource(s)
		wg.Go(func() {
			defer logging.HandleCrash(s.logger, "pod source: file")
			f.run(ctx)
		})
	}
	if s.opts.ManifestURL != "" {
		h := newHTTPSource(s)
		wg.Go(func() {
			defer logging.HandleCrash(s.logger, "pod source: http")
			h.run(ctx)
		})
	}
	if s.opts.Client != nil {
		a := newAPISource(s)
		wg.Go(func() {
			defer logging.HandleCrash(s.logger, "pod source: api")
			a.run(ctx)
		})
	}
	wg.Wait()
}

// Updates returns the stream of pod updates.
func (s *Source) Updates() <-chan kubecontainer.PodUpdate { return s.updates }

// SeenAllSources reports whether every configured source has delivered its first state.
// With no source configured it is true.
func (s *Source) SeenAllSources() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ok := range s.seen {
		if !ok {
			return false
		}
	}
	return true
}

// markSeen records that a source delivered its first state.
func (s *Source) markSeen(source string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[source] = true
}

// recordInvalid logs an unusable manifest and sends a Warning event about it. The event's
// object is a stub pod named after the manifest, whose pod name may be unknown.
func (s *Source) recordInvalid(source, path, msg string) {
	s.logger.Warn("Ignoring invalid pod manifest", zap.String("source", source),
		zap.String("path", path), zap.String("error", msg))
	if s.opts.Recorder == nil {
		return
	}
	if !strings.Contains(msg, path) {
		msg = path + ": " + msg
	}
	stub := &v1.Pod{}
	stub.Name = path
	stub.Namespace = "default"
	stub.Annotations = map[string]string{kubecontainer.ConfigSourceAnnotationKey: source}
	s.opts.Recorder.Event(stub, v1.EventTypeWarning, "FailedToParseManifest", msg)
}

// emitter sends one source's full state when it changed. It keeps config.seen stable (a
// pod keeps the first-seen time of the first state it appeared in) and reports each
// problem once, not at every re-read.
type emitter struct {
	src       *Source
	name      string
	sent      bool
	last      []*v1.Pod
	firstSeen map[k8stypes.UID]string
	problems  map[string]string // path -> message reported
}

func newEmitter(src *Source, name string) *emitter {
	return &emitter{src: src, name: name, firstSeen: map[k8stypes.UID]string{}, problems: map[string]string{}}
}

// report logs and records the problems that are new or changed since the last call and
// forgets the ones that went away.
func (e *emitter) report(problems map[string]string) {
	for path, msg := range problems {
		if e.problems[path] != msg {
			e.src.recordInvalid(e.name, path, msg)
		}
	}
	for path := range e.problems {
		if _, ok := problems[path]; !ok {
			e.src.logger.Info("Pod manifest problem resolved", zap.String("source", e.name), zap.String("path", path))
		}
	}
	e.problems = problems
}

// emit reports the problems, then sends pods as the source's full state unless it equals
// the last state sent. It blocks until the update is taken or ctx ends.
func (e *emitter) emit(ctx context.Context, entries []entry, problems map[string]string) {
	pods := dropDuplicates(entries, problems)
	e.report(problems)
	firstSeen := make(map[k8stypes.UID]string, len(pods))
	for _, pod := range pods {
		if t, ok := e.firstSeen[pod.UID]; ok {
			pod.Annotations[kubecontainer.ConfigFirstSeenAnnotationKey] = t
		}
		firstSeen[pod.UID] = pod.Annotations[kubecontainer.ConfigFirstSeenAnnotationKey]
	}
	if e.sent && apiequality.Semantic.DeepEqual(e.last, pods) {
		return
	}
	out := make([]*v1.Pod, len(pods))
	for i, pod := range pods {
		out[i] = pod.DeepCopy()
	}
	// Mark the source seen before sending, so a consumer that got the update sees it.
	e.src.mu.Lock()
	e.src.seen[e.name] = true
	e.src.mu.Unlock()
	select {
	case e.src.updates <- kubecontainer.PodUpdate{Pods: out, Op: kubecontainer.SET, Source: e.name}:
	case <-ctx.Done():
		return
	}
	e.sent, e.last, e.firstSeen = true, pods, firstSeen
	e.src.logger.Debug("Sent pods", zap.String("source", e.name), zap.Int("pods", len(out)))
}

// entry is a decoded pod and the manifest it came from.
type entry struct {
	pod    *v1.Pod
	origin string
}

// dropDuplicates keeps the first pod of each namespace/name and of each UID, as the
// upstream config merger does; later ones are dropped and added to problems under their
// manifest's path.
func dropDuplicates(entries []entry, problems map[string]string) []*v1.Pod {
	names := map[string]string{}
	uids := map[k8stypes.UID]string{}
	out := make([]*v1.Pod, 0, len(entries))
	for _, en := range entries {
		pod := en.pod
		full := pod.Namespace + "/" + pod.Name
		first, dupName := names[full]
		if !dupName {
			first = uids[pod.UID]
		}
		if dupName || uids[pod.UID] != "" {
			problems[en.origin] = fmt.Sprintf("pod %q (UID %s) duplicates a pod of %q; ignored", full, pod.UID, first)
			continue
		}
		names[full], uids[pod.UID] = en.origin, en.origin
		out = append(out, pod)
	}
	return out
}
