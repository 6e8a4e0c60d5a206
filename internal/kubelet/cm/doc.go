// Package cm is the container manager: the node's cgroup tree, as upstream's
// kubelet lays it out and sizes it.
//
//   - the node-allocatable cgroup, kubepods, under --cgroup-root ("" is /),
//     sized from the node's capacity minus systemReserved and kubeReserved when
//     "pods" is in enforceNodeAllocatable (no eviction threshold subtracted, so
//     eviction acts before the cgroup OOM-kills), with the node's pid capacity;
//   - the QoS cgroups kubepods/burstable (cpu.shares = the Burstable pods'
//     requests, kept current as pods come and go and every minute) and
//     kubepods/besteffort (cpu.shares 2); Guaranteed pods sit directly under
//     kubepods;
//   - one cgroup per pod, pod<uid> under its QoS cgroup, created before the
//     sandbox with ResourceConfigForPod (cpu.shares from requests, CFS quota
//     and memory limit when every container has one, pod-level resources and
//     overhead as upstream) and --pod-max-pids, removed (what still runs in it
//     killed) once the pod terminated, orphans found by housekeeping.
//
// Names are cgroups.Names (components) that each driver kind turns into paths:
// cgroupfs /kubepods/burstable/pod<uid>, systemd
// /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice
// ('-' escaped to '_'). The cgroups are written through a cgroups.Driver:
// the cgroupfs driver (cgroups.NewCgroupfs) writes the cgroup filesystem
// directly, cgroup v1 (every mounted hierarchy) and v2 (controllers enabled
// down the path; cpu.weight from shares by upstream's linear formula); no
// file name of a cgroup appears in this package. With --cgroup-driver=systemd
// the manager refuses to start on a host without systemd; with systemd it
// manages no cgroup yet (systemd's slices are made through its D-Bus API) and
// says so at start.
//
// The runtime helper hands PodCgroupParent to the CRI as the sandbox's
// cgroup_parent; the kubelet calls EnsurePod before the runtime syncs a pod,
// DestroyPod when it terminated and CleanupOrphans in housekeeping. It imports
// internal/cgroups (names, resources and the CPU conversions), internal/lifecycle
// and internal/kubelet/container of this module.
package cm
