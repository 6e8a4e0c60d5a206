package stats

import (
	"compress/gzip"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
)

// /metrics/cadvisor serves what cAdvisor v0.60.5 serves in the kubelet (the
// series, help texts, types and label sets of its Prometheus collector and
// machine collector), read by the kubelet itself from cgroup v1 files, the CRI
// lists and /proc (cadvisor_linux.go):
//
//   - rows: "/" (the host), --runtime-cgroups, the node-allocatable cgroup and
//     the QoS cgroups (only id set), pod cgroups (id, pod and namespace), and every container
//     cgroup under a pod cgroup with the labels the dockershim-era kubelet gave
//     them: name = the Docker name (k8s_<container>_<pod>_<namespace>_<uid>_<attempt>),
//     image, container (POD for the sandbox), pod and namespace. The sandbox row
//     carries the pod's network series; "/" the host's;
//   - filesystems: "/" one set per partition, app containers their writable
//     layer and logs (cadvisor_fs_linux.go);
//   - values: sampled at scrape time through held cgroup files
//     (cgroups.HeldFiles); stats series carry the sample time as their
//     timestamp, spec, start-time and machine series none (as the kubelet's
//     cAdvisor). Spec files are re-read at most every cadvisorSpecPeriod;
//   - the exposition is written directly (client_golang's Gather costs 40
//     times more for 24k series), gzipped at BestSpeed when the client accepts it.
//
// On cgroup v2 only the machine series and the "/" row's network and times are
// served.

const (
	cadvisorContentType = "text/plain; version=0.0.4; charset=utf-8"
	// cadvisorSpecPeriod is how long a row's spec (cpu.shares, CFS, memory limits)
	// is reused.
	cadvisorSpecPeriod = 10 * time.Second
	// cadvisorRelistMin is how often, at most, the CRI lists that label the rows
	// are asked again because a pod or container cgroup is not in them (a row's
	// labels never change once known).
	cadvisorRelistMin = 2 * time.Second
	// cadvisorFileIdle closes the held files of rows gone this long.
	cadvisorFileIdle = time.Minute
)

// CadvisorOptions configures /metrics/cadvisor.
type CadvisorOptions struct {
	// SandboxImage is the pods' sandbox (pause) image (--pod-infra-container-image),
	// the image label of the sandbox rows.
	SandboxImage string
}

// CadvisorMetrics returns the /metrics/cadvisor handler. Each call makes a new one,
// with its own held cgroup files; the API servers share one.
func (p *Provider) CadvisorMetrics(o CadvisorOptions) http.Handler {
	return &cadvisor{
		p: p, sandboxImage: o.SandboxImage, files: cgroups.NewHeldFiles(),
		rows: map[string]*cadRow{}, devNames: map[[2]uint64]string{},
		bufs: sync.Pool{New: func() any { return new([]byte) }},
		gz: sync.Pool{New: func() any {
			w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
			return w
		}},
	}
}

// cadvisor is the /metrics/cadvisor handler: its rows and what was last read.
type cadvisor struct {
	p            *Provider
	sandboxImage string
	files        *cgroups.HeldFiles
	bufs, gz     sync.Pool

	machineOnce sync.Once
	machine     machineInfo

	mu       sync.Mutex // one scrape at a time; guards the rest
	rows     map[string]*cadRow
	order    []*cadRow // rows sorted by labels
	meta     *criMeta
	metaAt   time.Time
	devNames map[[2]uint64]string // block device numbers to /dev names
	fs       cadvisorFs           // the filesystems and the containers' usage
}

// rowKind tells how a row is labelled and what it carries.
type rowKind int

const (
	rowRoot      rowKind = iota // "/": the host (network from /proc/1/net/dev)
	rowRaw                      // node-allocatable and QoS cgroups: only id
	rowPod                      // pod<uid>: pod and namespace
	rowContainer                // a container cgroup under a pod cgroup
)

// cadRow is one cgroup served.
type cadRow struct {
	id      string // cgroup path, "/" for the root
	kind    rowKind
	podUID  string // rowPod, rowContainer
	cid     string // rowContainer: the cgroup's basename (Docker ID = CRI ID)
	labeled bool   // the CRI lists named it (pod and container rows)
	sandbox bool   // a pod's sandbox (pause) container: carries the pod's network
	dirs    cgroups.CadvisorDirs
	lbl     rowLabels
	start   float64 // unix seconds

	seen   bool // found by this scrape's walk
	ok     bool // stats read by this scrape
	at     int64
	stats  cgroups.CadvisorStats
	spec   cgroups.CadvisorSpec
	specAt time.Time
	devs   []string // /dev names of stats.IO's devices, escaped
	pid    int      // rowContainer sandbox: a process in it, for its net/dev
	ooms   uint64   // the OOM kills the kernel logged of the cgroup
	net    []netIface
	fs     []rowFs // the root's partitions; a container's writable layer and logs
}

// ServeHTTP scrapes and writes the exposition, gzipped when the client accepts it.
func (c *cadvisor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	bp := c.bufs.Get().(*[]byte)
	defer c.bufs.Put(bp)
	*bp = c.render(r.Context(), (*bp)[:0])
	h := w.Header()
	h.Set("Content-Type", cadvisorContentType)
	if !acceptsGzip(r) {
		h.Set("Content-Length", strconv.Itoa(len(*bp)))
		_, _ = w.Write(*bp)
		return
	}
	h.Set("Content-Encoding", "gzip")
	h.Add("Vary", "Accept-Encoding")
	gz := c.gz.Get().(*gzip.Writer)
	defer c.gz.Put(gz)
	gz.Reset(w)
	_, _ = gz.Write(*bp)
	_ = gz.Close()
}

func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, part := range strings.Split(v, ",") {
			enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
			if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(q, " ", "") != "q=0" {
				return true
			}
		}
	}
	return false
}

// render scrapes the rows and appends the exposition to buf.
func (c *cadvisor) render(ctx context.Context, buf []byte) []byte {
	c.machineOnce.Do(func() { c.machine = readMachineInfo(c.p.host.procRoot) })
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.p.now()
	err := c.collect(ctx, now)
	if err != nil {
		c.p.logger.Debug("cadvisor metrics", zap.Error(err))
	}
	return writeCadvisor(buf, c.order, &c.machine, err != nil, now)
}

// netIface is one interface's net/dev counters (indexes netRxBytes...).
type netIface struct {
	name string
	v    [8]uint64
}
