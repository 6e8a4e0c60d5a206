package stats

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
)

// rowLabels are a row's label block, rendered once: the six base labels
// (container, id, image, name, namespace, pod) in the exposition's (alphabetical)
// order, and the pieces around the extra labels cpu, device and interface.
type rowLabels struct {
	full     string // container="",id="/",image="",name="",namespace="",pod=""
	cpu      string // ... with cpu="total" after container
	devPre   string // container="",device="
	devSuf   string // ",id="/",...
	ifacePre string // container="",id="/",image="",interface="
	ifaceSuf string // ",name="",namespace="",pod=""
	mid      string // id="/",image=""
	nameNs   string // name="",namespace=""
	pod      string // pod=""
}

// newRowLabels renders the label block of a row.
func newRowLabels(container, id, image, name, namespace, pod string) rowLabels {
	c := `container="` + escapeLabel(container) + `"`
	mid := `id="` + escapeLabel(id) + `",image="` + escapeLabel(image) + `"`
	nameNs := `name="` + escapeLabel(name) + `",namespace="` + escapeLabel(namespace) + `"`
	podL := `pod="` + escapeLabel(pod) + `"`
	tail := nameNs + "," + podL
	return rowLabels{
		mid: mid, nameNs: nameNs, pod: podL,
		full:     c + "," + mid + "," + tail,
		cpu:      c + `,cpu="total",` + mid + "," + tail,
		devPre:   c + `,device="`,
		devSuf:   `",` + mid + "," + tail,
		ifacePre: c + "," + mid + `,interface="`,
		ifaceSuf: `",` + tail,
	}
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeLabel(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return labelEscaper.Replace(s)
}

// rowFs is one filesystem of a row (cAdvisor's FsStats; cadvisor_fs_linux.go).
type rowFs struct {
	dev                string // device label, escaped
	limit, usage       uint64
	inodes, inodesFree uint64
	hasInodes          bool
	disk               diskStats // zeros but on the root row
}

// diskStats are the first eleven counters of a /proc/diskstats line, in the
// kernel's order (indexes diskReads...); the times are in milliseconds.
type diskStats [11]uint64

// diskStats indexes.
const (
	diskReads = iota
	diskReadsMerged
	diskSectorsRead
	diskReadMs
	diskWrites
	diskWritesMerged
	diskSectorsWritten
	diskWriteMs
	diskIOInProgress
	diskIOMs
	diskWeightedIOMs
)

// diskCount is a filesystem's diskstats counter i.
func diskCount(i int) func(f *rowFs) (float64, bool) {
	return func(f *rowFs) (float64, bool) { return float64(f.disk[i]), true }
}

// diskSeconds is a filesystem's diskstats time i as cAdvisor serves it: the
// milliseconds divided by 1e9 (its FsStats times are milliseconds, its
// metrics divide them by time.Second), so 1e6 times less than the seconds.
func diskSeconds(i int) func(f *rowFs) (float64, bool) {
	return func(f *rowFs) (float64, bool) { return float64(f.disk[i]) / nsPerSecond, true }
}

// familyKind is how a family's series are made from a row.
type familyKind int

const (
	famStat      familyKind = iota // one series per row with stats, sample timestamp
	famCPU                         // famStat with cpu="total"
	famSpec                        // one series per row, no timestamp
	famDevice                      // one series per blkio device, sample timestamp
	famInterface                   // one series per network interface, sample timestamp
	famLastSeen                    // scrape time, with the scrape time as timestamp
	famFs                          // one series per filesystem of a row with stats, sample timestamp
	famBlkioOp                     // one series per blkio device and operation listed, sample timestamp
	// famDeviceFs: famDevice's series (when dev is set), then famFs's of the
	// filesystems whose device label no blkio series of the row took
	// (cAdvisor's ioValues; client_golang's Gather drops the later duplicate).
	famDeviceFs
)

// cadFamily is one metric family of cAdvisor's collector.
type cadFamily struct {
	name, help, typ string
	kind            familyKind
	// value is the row's value; ok false: no series for the row.
	value func(r *cadRow) (float64, bool)
	// dev and iface give a device's or interface's value.
	dev   func(d *cgroups.DeviceIO) (float64, bool)
	iface int // index into netIface.v
	// fs gives a filesystem's value; ok false: no series for it.
	fs func(f *rowFs) (float64, bool)
}

// devServed reports whether a famDeviceFs family has a blkio series of row r
// labelled dev.
func (f *cadFamily) devServed(r *cadRow, dev string) bool {
	if f.dev == nil {
		return false
	}
	for i := range r.stats.IO {
		if r.devs[i] == dev {
			if _, ok := f.dev(&r.stats.IO[i]); ok {
				return true
			}
		}
	}
	return false
}

const nsPerSecond = float64(time.Second)

func statVal(f func(s *cgroups.CadvisorStats) float64, cond func(r *cadRow) bool) func(r *cadRow) (float64, bool) {
	return func(r *cadRow) (float64, bool) {
		if !cond(r) {
			return 0, false
		}
		return f(&r.stats), true
	}
}

func hasCPU(r *cadRow) bool       { return r.stats.HasCPU }
func hasMemory(r *cadRow) bool    { return r.stats.HasMemory }
func hasQuota(r *cadRow) bool     { return r.stats.HasThrottling && r.spec.Quota != 0 }
func hasCPUUsage(r *cadRow) bool  { return r.stats.HasCPU && r.stats.CPUUsage > 0 }
func hasSpecCPU(r *cadRow) bool   { return r.spec.HasCPU }
func hasSpecMem(r *cadRow) bool   { return r.spec.HasMemory }
func hasSpecQuota(r *cadRow) bool { return r.spec.HasCPU && r.spec.Quota != 0 }

func specVal(f func(s *cgroups.CadvisorSpec) float64, cond func(r *cadRow) bool) func(r *cadRow) (float64, bool) {
	return func(r *cadRow) (float64, bool) {
		if !cond(r) {
			return 0, false
		}
		return f(&r.spec), true
	}
}

// specMemory is cAdvisor's specMemoryValue: "unlimited" (above 2^62) is 0.
func specMemory(v uint64) float64 {
	if v > 1<<62 {
		return 0
	}
	return float64(v)
}

// Network counter indexes in netIface.v.
const (
	netRxBytes = iota
	netRxPackets
	netRxErrors
	netRxDropped
	netTxBytes
	netTxPackets
	netTxErrors
	netTxDropped
)

// cadvisorFamilies are the container families served, sorted by name as
// client_golang's Gather sorts them. Help texts are cAdvisor v0.60.5's.
var cadvisorFamilies = []cadFamily{
	{name: "container_blkio_device_usage_total", help: "Blkio Device bytes usage", typ: "counter", kind: famBlkioOp},
	{name: "container_cpu_cfs_periods_total", help: "Number of elapsed enforcement period intervals.", typ: "counter",
		value: statVal(func(s *cgroups.CadvisorStats) float64 { return float64(s.Periods) }, hasQuota)},
	{name: "container_cpu_cfs_throttled_periods_total", help: "Number of throttled period intervals.", typ: "counter",
		value: statVal(func(s *cgroups.CadvisorStats) float64 { return float64(s.Throttled) }, hasQuota)},
	{name: "container_cpu_cfs_throttled_seconds_total", help: "Total time duration the container has been throttled.", typ: "counter",
		value: statVal(func(s *cgroups.CadvisorStats) float64 { return float64(s.ThrottledTime) / nsPerSecond }, hasQuota)},
	{name: "container_cpu_system_seconds_total", help: "Cumulative system cpu time consumed in seconds.", typ: "counter",
		value: statVal(func(s *cgroups.CadvisorStats) float64 { return float64(s.CPUSystem) / nsPerSecond }, hasCPU)},
	{name: "container_cpu_usage_seconds_total", help: "Cumulative cpu time consumed in seconds.", typ: "counter", kind: famCPU,
		value: statVal(func(s *cgroups.CadvisorStats) float64 { return float64(s.CPUUsage) / nsPerSecond }, hasCPUUsage)},
	{name: "container_cpu_user_seconds_total", help: "Cumulative user cpu time consumed in seconds.", typ: "counter",
		value: statVal(func(s *cgroups.CadvisorStats) float64 { return float64(s.CPUUser) / nsPerSecond }, hasCPU)},
	{name: "container_fs_inodes_free", help: "Number of available Inodes", typ: "gauge", kind: famFs,
		fs: func(f *rowFs) (float64, bool) { return float64(f.inodesFree), f.hasInodes }},
	{name: "container_fs_inodes_total", help: "Number of Inodes", typ: "gauge", kind: famFs,
		fs: func(f *rowFs) (float64, bool) { return float64(f.inodes), f.hasInodes }},
	{name: "container_fs_io_current", help: "Number of I/Os currently in progress", typ: "gauge", kind: famDeviceFs,
		fs: diskCount(diskIOInProgress)},
	{name: "container_fs_io_time_seconds_total", help: "Cumulative count of seconds spent doing I/Os", typ: "counter", kind: famDeviceFs,
		fs: diskSeconds(diskIOMs)},
	{name: "container_fs_io_time_weighted_seconds_total", help: "Cumulative weighted I/O time in seconds", typ: "counter", kind: famFs,
		fs: diskSeconds(diskWeightedIOMs)},
	{name: "container_fs_limit_bytes", help: "Number of bytes that can be consumed by the container on this filesystem.", typ: "gauge", kind: famFs,
		fs: func(f *rowFs) (float64, bool) { return float64(f.limit), true }},
	{name: "container_fs_read_seconds_total", help: "Cumulative count of seconds spent reading", typ: "counter", kind: famDeviceFs,
		fs: diskSeconds(diskReadMs)},
	{name: "container_fs_reads_bytes_total", help: "Cumulative count of bytes read", typ: "counter", kind: famDevice,
		dev: func(d *cgroups.DeviceIO) (float64, bool) { return float64(d.Read), true }},
	{name: "container_fs_reads_merged_total", help: "Cumulative count of reads merged", typ: "counter", kind: famDeviceFs,
		fs: diskCount(diskReadsMerged)},
	{name: "container_fs_reads_total", help: "Cumulative count of reads completed", typ: "counter", kind: famDeviceFs,
		dev: func(d *cgroups.DeviceIO) (float64, bool) { return float64(d.Reads), d.HasServiced },
		fs:  diskCount(diskReads)},
	{name: "container_fs_sector_reads_total", help: "Cumulative count of sector reads completed", typ: "counter", kind: famDeviceFs,
		fs: diskCount(diskSectorsRead)},
	{name: "container_fs_sector_writes_total", help: "Cumulative count of sector writes completed", typ: "counter", kind: famDeviceFs,
		fs: diskCount(diskSectorsWritten)},
	{name: "container_fs_usage_bytes", help: "Number of bytes that are consumed by the container on this filesystem.", typ: "gauge", kind: famFs,
		fs: func(f *rowFs) (float64, bool) { return float64(f.usage), true }},
	{name: "container_fs_write_seconds_total", help: "Cumulative count of seconds spent writing", typ: "counter", kind: famDeviceFs,
		fs: diskSeconds(diskWriteMs)},
	{name: "container_fs_writes_bytes_total", help: "Cumulative count of bytes written", typ: "counter", kind: famDevice,
		dev: func(d *cgroups.DeviceIO) (float64, bool) { return float64(d.Write), true }},
	{name: "container_fs_writes_merged_total", help: "Cumulative count of writes merged", typ: "counter", kind: famDeviceFs,
		fs: diskCount(diskWritesMerged)},
	{name: "container_fs_writes_total", help: "Cumulative count of writes completed", typ: "counter", kind: famDeviceFs,
		dev: func(d *cgroups.DeviceIO) (float64, bool) { return float64(d.Writes), d.HasServiced },
		fs:  diskCount(diskWrites)},
	{name: "container_last_seen", help: "Last time a container was seen by the exporter", typ: "gauge", kind: famLastSeen},
	{name: "container_memory_cache", help: "Number of bytes of page cache memory.", typ: "gauge",
		value: statVal(func(s *cgroups.CadvisorStats) float64 { return float64(s.Cache) }, hasMemory)},
	{name: "container_memory_failcnt", help: "Number of memory usage hits limits", typ: "counter",
		value: statVal(func(s *cgroups.CadvisorStats) float64 { return float64(s.MemFailcnt) }, hasMemory)},
	{name: "container_memory_mapped_file", help: "Size of memory mapped files in bytes.", typ: "gauge",
		value: statVal(func(s *cgroups.CadvisorStats) float64 { return float64(s.MappedFile) }, hasMemory)},
	{name: "container_memory_max_usage_bytes", help: "Maximum memory usage recorded in bytes", typ: "gauge",
		value: statVal(func(s *cgroups.CadvisorStats) float64 { return float64(s.MemMaxUsage) }, hasMemory)},
	{name: "container_memory_rss", help: "Size of RSS in bytes.", typ: "gauge",
		value: statVal(func(s *cgroups.CadvisorStats) float64 { return float64(s.RSS) }, hasMemory)},
	{name: "container_memory_swap", help: "Container swap usage in bytes.", typ: "gauge",
		value: statVal(func(s *cgroups.CadvisorStats) float64 { return float64(s.Swap) }, hasMemory)},
	{name: "container_memory_usage_bytes", help: "Current memory usage in bytes, including all memory regardless of when it was accessed", typ: "gauge",
		value: statVal(func(s *cgroups.CadvisorStats) float64 { return float64(s.MemUsage) }, hasMemory)},
	{name: "container_memory_working_set_bytes", help: "Current working set in bytes.", typ: "gauge",
		value: statVal(func(s *cgroups.CadvisorStats) float64 { return float64(s.WorkingSet) }, hasMemory)},
	{name: "container_network_receive_bytes_total", help: "Cumulative count of bytes received", typ: "counter", kind: famInterface, iface: netRxBytes},
	{name: "container_network_receive_errors_total", help: "Cumulative count of errors encountered while receiving", typ: "counter", kind: famInterface, iface: netRxErrors},
	{name: "container_network_receive_packets_dropped_total", help: "Cumulative count of packets dropped while receiving", typ: "counter", kind: famInterface, iface: netRxDropped},
	{name: "container_network_receive_packets_total", help: "Cumulative count of packets received", typ: "counter", kind: famInterface, iface: netRxPackets},
	{name: "container_network_transmit_bytes_total", help: "Cumulative count of bytes transmitted", typ: "counter", kind: famInterface, iface: netTxBytes},
	{name: "container_network_transmit_errors_total", help: "Cumulative count of errors encountered while transmitting", typ: "counter", kind: famInterface, iface: netTxErrors},
	{name: "container_network_transmit_packets_dropped_total", help: "Cumulative count of packets dropped while transmitting", typ: "counter", kind: famInterface, iface: netTxDropped},
	{name: "container_network_transmit_packets_total", help: "Cumulative count of packets transmitted", typ: "counter", kind: famInterface, iface: netTxPackets},
	// As upstream's kubelet, the kills its OOM watcher read in the kernel log
	// of the exact cgroup (the kill line's task_memcg), for every row.
	{name: "container_oom_events_total", help: "Count of out of memory events observed for the container", typ: "counter",
		value: func(r *cadRow) (float64, bool) { return float64(r.ooms), true }},
	{name: "container_spec_cpu_period", help: "CPU period of the container.", typ: "gauge", kind: famSpec,
		value: specVal(func(s *cgroups.CadvisorSpec) float64 { return float64(s.Period) }, hasSpecCPU)},
	{name: "container_spec_cpu_quota", help: "CPU quota of the container.", typ: "gauge", kind: famSpec,
		value: specVal(func(s *cgroups.CadvisorSpec) float64 { return float64(s.Quota) }, hasSpecQuota)},
	{name: "container_spec_cpu_shares", help: "CPU share of the container.", typ: "gauge", kind: famSpec,
		value: specVal(func(s *cgroups.CadvisorSpec) float64 { return float64(s.Shares) }, hasSpecCPU)},
	{name: "container_spec_memory_limit_bytes", help: "Memory limit for the container.", typ: "gauge", kind: famSpec,
		value: specVal(func(s *cgroups.CadvisorSpec) float64 { return specMemory(s.Limit) }, hasSpecMem)},
	{name: "container_spec_memory_reservation_limit_bytes", help: "Memory reservation limit for the container.", typ: "gauge", kind: famSpec,
		value: specVal(func(s *cgroups.CadvisorSpec) float64 { return specMemory(s.Reservation) }, hasSpecMem)},
	{name: "container_spec_memory_swap_limit_bytes", help: "Memory swap limit for the container.", typ: "gauge", kind: famSpec,
		value: specVal(func(s *cgroups.CadvisorSpec) float64 { return specMemory(s.SwapLimit) }, hasSpecMem)},
	{name: "container_start_time_seconds", help: "Start time of the container since unix epoch in seconds.", typ: "gauge", kind: famSpec,
		value: func(r *cadRow) (float64, bool) { return r.start, true }},
}

// writeCadvisor appends the exposition of rows (sorted) and the machine to buf:
// the container families, container_scrape_error, then the machine families.
func writeCadvisor(buf []byte, rows []*cadRow, m *machineInfo, scrapeErr bool, now time.Time) []byte {
	nowMs := now.UnixMilli()
	for i := range cadvisorFamilies {
		buf = writeFamily(buf, &cadvisorFamilies[i], rows, now, nowMs)
	}
	buf = appendHeader(buf, "container_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", "gauge")
	buf = append(buf, "container_scrape_error "...)
	buf = appendBool(buf, scrapeErr)
	buf = append(buf, '\n')
	return writeMachine(buf, m)
}

func writeFamily(buf []byte, f *cadFamily, rows []*cadRow, now time.Time, nowMs int64) []byte {
	w := famWriter{buf: buf, f: f}
	for _, r := range rows {
		switch f.kind {
		case famStat, famCPU:
			v, ok := 0.0, r.ok
			if ok {
				v, ok = f.value(r)
			}
			if !ok {
				continue
			}
			w.line()
			if f.kind == famCPU {
				w.buf = append(w.buf, r.lbl.cpu...)
			} else {
				w.buf = append(w.buf, r.lbl.full...)
			}
			w.buf = appendValue(w.buf, v, r.at)
		case famSpec:
			v, ok := f.value(r)
			if !ok {
				continue
			}
			w.line()
			w.buf = appendValue(append(w.buf, r.lbl.full...), v, -1)
		case famLastSeen:
			w.line()
			w.buf = appendValue(append(w.buf, r.lbl.full...), float64(now.Unix()), nowMs)
		case famDevice:
			w.devices(r)
		case famDeviceFs:
			w.devices(r)
			w.filesystems(r, true)
		case famFs:
			w.filesystems(r, false)
		case famBlkioOp:
			w.blkioOps(r)
		case famInterface:
			for i := range r.net {
				n := &r.net[i]
				w.line()
				w.buf = append(append(append(w.buf, r.lbl.ifacePre...), escapeLabel(n.name)...), r.lbl.ifaceSuf...)
				w.buf = appendValue(w.buf, float64(n.v[f.iface]), r.at)
			}
		}
	}
	return w.buf
}

// famWriter appends one family's series to buf, its HELP and TYPE before the
// first.
type famWriter struct {
	buf    []byte
	f      *cadFamily
	header bool
}

// line starts a series: the header when first, the name and the brace.
func (w *famWriter) line() {
	if !w.header {
		w.buf = appendHeader(w.buf, w.f.name, w.f.help, w.f.typ)
		w.header = true
	}
	w.buf = append(append(w.buf, w.f.name...), '{')
}

// devices appends a row's blkio device series (none when the family has no
// blkio value).
func (w *famWriter) devices(r *cadRow) {
	if !r.ok || w.f.dev == nil {
		return
	}
	for i := range r.stats.IO {
		v, ok := w.f.dev(&r.stats.IO[i])
		if !ok {
			continue
		}
		w.line()
		w.buf = append(append(append(w.buf, r.lbl.devPre...), r.devs[i]...), r.lbl.devSuf...)
		w.buf = appendValue(w.buf, v, r.at)
	}
}

// filesystems appends a row's filesystem series; with afterDevices, not
// those whose device label a blkio series of the family took.
func (w *famWriter) filesystems(r *cadRow, afterDevices bool) {
	if !r.ok {
		return
	}
	for i := range r.fs {
		v, ok := w.f.fs(&r.fs[i])
		if !ok || afterDevices && w.f.devServed(r, r.fs[i].dev) {
			continue
		}
		w.line()
		w.buf = append(append(append(w.buf, r.lbl.devPre...), r.fs[i].dev...), r.lbl.devSuf...)
		w.buf = appendValue(w.buf, v, r.at)
	}
}

// blkioOps appends a row's container_blkio_device_usage_total series: one per
// device and operation its io_service_bytes listed.
func (w *famWriter) blkioOps(r *cadRow) {
	if !r.ok {
		return
	}
	for i := range r.stats.IO {
		d := &r.stats.IO[i]
		for op, name := range cgroups.BlkioOps {
			if d.OpsSeen&(1<<op) == 0 {
				continue
			}
			w.line()
			buf := append(append(append(append(w.buf, r.lbl.devPre...), r.devs[i]...), `",`...), r.lbl.mid...)
			buf = strconv.AppendUint(append(buf, `,major="`...), d.Major, 10)
			buf = strconv.AppendUint(append(buf, `",minor="`...), d.Minor, 10)
			buf = append(append(append(buf, `",`...), r.lbl.nameNs...), `,operation="`...)
			buf = append(append(append(buf, name...), `",`...), r.lbl.pod...)
			w.buf = appendValue(buf, float64(d.Bytes[op]), r.at)
		}
	}
}

// appendHeader appends a family's HELP and TYPE lines (help texts hold no
// backslash or newline to escape).
func appendHeader(buf []byte, name, help, typ string) []byte {
	buf = append(append(append(append(buf, "# HELP "...), name...), ' '), help...)
	return append(append(append(append(buf, "\n# TYPE "...), name...), ' '), typ+"\n"...)
}

// appendValue closes the label block and appends the value and, when ts >= 0, the
// timestamp in milliseconds.
func appendValue(buf []byte, v float64, ts int64) []byte {
	buf = append(buf, "} "...)
	buf = appendFloat(buf, v)
	if ts >= 0 {
		buf = strconv.AppendInt(append(buf, ' '), ts, 10)
	}
	return append(buf, '\n')
}

// appendFloat formats a value as the Prometheus text format does.
func appendFloat(buf []byte, v float64) []byte {
	switch {
	case v == 1:
		return append(buf, '1')
	case v == 0:
		return append(buf, '0')
	case math.IsInf(v, 1):
		return append(buf, "+Inf"...)
	case math.IsInf(v, -1):
		return append(buf, "-Inf"...)
	case math.IsNaN(v):
		return append(buf, "NaN"...)
	}
	return strconv.AppendFloat(buf, v, 'g', -1, 64)
}

func appendBool(buf []byte, b bool) []byte {
	if b {
		return append(buf, '1')
	}
	return append(buf, '0')
}
