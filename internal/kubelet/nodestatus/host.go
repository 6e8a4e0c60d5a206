package nodestatus

// usage is one sample of the eviction signals' inputs.
type usage struct {
	memoryCapacity, memoryAvailable int64 // bytes (MemTotal, MemAvailable)
	fsCapacity, fsAvailable         int64 // bytes, the root dir's filesystem
	inodes, inodesFree              int64
	maxPID, processes               int64 // min(pid_max, threads-max), running tasks
}

// host samples the machine's usage; usage returns what it could read with an
// error naming what it could not. A fake replaces it in tests.
type host interface {
	usage(rootDir string) (usage, error)
}
