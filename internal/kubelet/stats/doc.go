// Package stats builds the kubelet's stats Summary (k8s.io/kubelet/pkg/apis/stats/v1alpha1)
// and serves it at /stats/summary and, as Prometheus metrics, at /metrics/resource.
// It also serves /metrics/cadvisor (CadvisorMetrics): cAdvisor's container and
// machine series, read from the cgroup v1 files of the root, kubepods, QoS, pod
// and container cgroups and labelled from the CRI lists (cadvisor.go says how),
// with the node's partitions and the containers' writable layer and log usage
// as filesystem series (cadvisor_fs_linux.go).
//
// The Summary follows upstream's CRI stats provider (pkg/kubelet/stats), with the
// node half read directly from the host instead of cAdvisor:
//
//   - node: CPU and memory of the root cgroup (cgroup v1, hybrid and v2; on v2 the
//     root has no memory.current, so usage comes from /proc/meminfo like runc does),
//     working set = usage - inactive_file, network from /proc/net/dev (minus lo,
//     veth*, docker* and nerdctl*, cAdvisor's ignore list), fs = statfs of RootDir,
//     runtime.imageFs from CRI ImageFsInfo, rlimit from pid_max/threads-max and
//     /proc/loadavg, swap from /proc/meminfo;
//   - pods: one ListPodSandboxStats (falling back to ListContainerStats when the
//     runtime answers Unimplemented), one ListPodSandbox and one ListContainers per
//     Summary, never a call per pod. Container start times are the containers'
//     CreatedAt. CPU rates (usageNanoCores) come from the runtime or, when it leaves
//     them out, from the previous sample of the same container;
//   - storage: volume usage of the pod's emptyDir, configMap, secret, projected and
//     downwardAPI directories under RootDir/pods/<uid>/volumes (a du-like walk, bounded,
//     cached for a minute), container logs under PodLogsDir, the pod's etc-hosts, and
//     ephemeral-storage = container writable layers + logs + ephemeral volumes.
//
// Summary(ctx, true) is upstream's GetCPUAndMemoryStats: node and pod CPU, memory and
// swap only, which is what /metrics/resource reports.
//
// Only the wiring (internal/app) may import it; the kubelet API server takes
// Handler(), CadvisorMetrics() and ResourceMetrics() as plain http.Handlers and a
// prometheus.Gatherer. Of this project it imports only the leaf internal/cgroups
// (its tests use internal/cri to reach a real shim).
package stats
