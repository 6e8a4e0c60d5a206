package nodestatus

// machineInfo is what the node's capacity and nodeInfo are made of.
type machineInfo struct {
	numCPU         int
	memoryCapacity int64           // MemTotal, bytes
	hugePages      map[int64]int64 // page size -> total bytes of preallocated pages
	fsCapacity     int64           // size of the filesystem holding the root dir, bytes
	kernelVersion  string
	osImage        string
	machineID      string
	systemUUID     string
	bootID         string
}

// usage is one sample of the eviction signals' inputs.
type usage struct {
	memoryCapacity, memoryAvailable int64 // bytes (MemTotal, MemAvailable)
	fsCapacity, fsAvailable         int64 // bytes, the root dir's filesystem
	inodes, inodesFree              int64
	maxPID, processes               int64 // min(pid_max, threads-max), running tasks
}

// host reads the machine. machine returns what it could read with an error
// naming what it could not; so does usage. A fake replaces it in tests.
type host interface {
	machine(rootDir string) (machineInfo, error)
	usage(rootDir string) (usage, error)
}
