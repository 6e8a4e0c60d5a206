// Package cpumanager is the kubelet's CPU manager, compatible with upstream
// kubelet v1.37's (pkg/kubelet/cm/cpumanager), with the static policy's
// options full-pcpus-only and strict-cpu-reservation (upstream's others are
// refused), NUMA hints for the topology manager, and upstream's
// kubelet_cpu_manager_* series.
//
// It discovers the CPU topology from sysfs (DiscoverTopology), keeps the
// shared pool and the exclusive CPU assignments in the checkpoint file
// cpu_manager_state in the kubelet's root directory - byte for byte upstream's
// format and checksums, so a node can switch between the two kubelets - and
// implements the "none" and "static" policies:
//
//   - none: nothing is assigned, no cpuset is set on containers;
//   - static: containers of Guaranteed pods with a whole-number CPU request
//     get CPUs of their own, picked by topology (whole sockets or NUMA nodes,
//     then whole cores, then threads); every other container runs on the
//     shared pool, which keeps the reserved CPUs (--reserved-cpus, or
//     ceil(kubeReserved.cpu + systemReserved.cpu) CPUs taken by topology from
//     the lowest cores) unless strict-cpu-reservation takes them out of it.
//
// The kubelet calls Allocate for each container at admission (an error
// rejects the pod with reason "UnexpectedAdmissionError", or the error's own
// Type such as SMTAlignmentError's, see Manager.Allocate), CPUSet when it
// creates a container (the value of the CRI's cpuset_cpus), RemoveContainer/RemovePod when containers or pods are
// gone. Start's reconcile loop moves running containers onto the current
// shared pool every ReconcilePeriod, through the pod status cache and the
// CRI runtime.
//
// Only the kubelet side (internal/kubelet/...) may import this package; it
// imports no runtime or shim code.
//
// Usage:
//
//	m, err := cpumanager.New(cpumanager.Options{
//		Policy:           cfg.CPUManagerPolicy,        // "none" or "static"
//		ReservedCPUs:     reservedCPUs,                // --reserved-cpus
//		ReservedMilliCPU: kubeReservedMilli + systemReservedMilli,
//		StateDir:         rootDir,                     // /var/lib/kubelet
//		Logger:           logger,
//		ActivePods:       podManager.ActivePods,
//		SourcesReady:     sources.SeenAllSources,
//		ReconcilePeriod:  cfg.CPUManagerReconcilePeriod,
//		Statuses:         podStatusCache,              // *kubecontainer.Cache
//		Containers:       criRuntime,                  // UpdateContainerResources
//	})
//	if err != nil {
//		return err
//	}
//	if err := m.Start(ctx); err != nil { // the reconcile loop ends with ctx
//		return err // "start cpu manager error: ..."
//	}
//	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
//		if err := m.Allocate(pod, &c); err != nil {
//			return reject(pod, "UnexpectedAdmissionError",
//				fmt.Sprintf("Allocate failed due to %v, which is unexpected", err))
//		}
//	}
//	if cpus, ok := m.CPUSet(string(pod.UID), c.Name); ok {
//		config.Linux.Resources.CpusetCpus = cpus.String()
//	}
package cpumanager
