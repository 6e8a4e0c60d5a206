package cgroups

// Driver creates, updates, destroys and reads the kubelet's cgroups by name:
// the cgroupfs driver (NewCgroupfs) writes the cgroup filesystem itself; a
// systemd driver would make its slices through systemd. Whether the host runs
// cgroup v1 (or hybrid) or v2 is the driver's business: nothing outside this
// package names a cgroup file.
type Driver interface {
	// Kind is the driver's name, which says how names become paths
	// (Kind.Path, Kind.Parse).
	Kind() Kind
	// Dir is n's path in the cgroup hierarchies, as /proc/<pid>/cgroup shows
	// it and the files are read (Host.Named): Kind.Path(n), below PID 1's
	// cgroup for the systemd driver. The runtime is given Kind.Path(n).
	Dir(n Name) string
	// Exists reports whether n exists in every hierarchy it must be in.
	Exists(n Name) bool
	// Validate is Exists with upstream's error: the paths missing on v1, the
	// controllers missing on v2.
	Validate(n Name) error
	// Create makes n (and its missing parents) and applies r.
	Create(n Name, r *Resources) error
	// Update applies the set fields of r to n.
	Update(n Name, r *Resources) error
	// ClearMemoryProtection sets memory.min and memory.low of n to 0 (v2; v1
	// has neither).
	ClearMemoryProtection(n Name) error
	// Children are the names of n's child cgroups (their last components).
	Children(n Name) ([]string, error)
	// Destroy kills what still runs in n (and below), then removes it; a
	// missing n is no error, the root is refused.
	Destroy(n Name) error
	// Read is what n applies now and its memory usage (in-place resize).
	Read(n Name) (Applied, error)
}

// Applied is what a cgroup applies, read back: cpu shares (v2: from
// cpu.weight), CFS quota (-1: none) and period, memory limit (-1: none) and
// the memory usage.
type Applied struct {
	CPUShares   *uint64
	CPUQuota    *int64
	CPUPeriod   *uint64
	Memory      *int64
	MemoryUsage int64
}
