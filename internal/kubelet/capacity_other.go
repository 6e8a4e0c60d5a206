//go:build !linux

package kubelet

func machineMemory() (int64, bool) { return 0, false }

func filesystemSize(string) (int64, bool) { return 0, false }
