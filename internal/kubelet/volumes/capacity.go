package volumes

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// allocatableList returns Options.Allocatable, or the machine's capacity read once.
func (m *Manager) allocatableList() (v1.ResourceList, error) {
	if m.allocatable != nil {
		return m.allocatable, nil
	}
	m.capacityOnce.Do(func() {
		m.capacity, m.capacityErr = machineCapacity(m.podsDir)
	})
	return m.capacity, m.capacityErr
}

// allocatableMemory is the allocatable memory in bytes, 0 when unknown.
func (m *Manager) allocatableMemory() int64 {
	list, err := m.allocatableList()
	if err != nil {
		m.logger.Warn("Node memory unknown; memory-backed volumes use the kernel's default size")
		return 0
	}
	if q, ok := list[v1.ResourceMemory]; ok {
		return q.Value()
	}
	return 0
}

// machineCapacity returns CPUs, MemTotal and the size of the file system holding
// podsDir (or its nearest existing parent).
func machineCapacity(podsDir string) (v1.ResourceList, error) {
	mem, err := memTotal("/proc/meminfo")
	if err != nil {
		return nil, err
	}
	list := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
	}
	if size, ok := fsSize(podsDir); ok {
		list[v1.ResourceEphemeralStorage] = *resource.NewQuantity(size, resource.BinarySI)
	}
	return list, nil
}

// memTotal reads MemTotal (bytes) from a meminfo file.
func memTotal(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read machine memory: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse MemTotal in %s: %w", path, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no MemTotal in %s", path)
}
