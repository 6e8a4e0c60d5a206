package memorymanager

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ReadNUMANodes reads each NUMA node's memory and huge pages under sysfs
// root (devices/system/node/node<N>: MemTotal of meminfo,
// hugepages/hugepages-<size>kB/nr_hugepages), as cAdvisor does for the
// machine info upstream's memory manager is built from. No node directory
// gives no nodes.
func ReadNUMANodes(root string) ([]NUMANode, error) {
	dir := filepath.Join(root, "devices", "system", "node")
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	var out []NUMANode
	for _, e := range entries {
		id, ok := strings.CutPrefix(e.Name(), "node")
		n, err := strconv.Atoi(id)
		if !ok || err != nil || !e.IsDir() {
			continue
		}
		node := NUMANode{ID: n}
		nodeDir := filepath.Join(dir, e.Name())
		if node.MemoryBytes, err = nodeMemTotal(filepath.Join(nodeDir, "meminfo")); err != nil {
			return nil, err
		}
		if node.HugePages, err = nodeHugePages(filepath.Join(nodeDir, "hugepages")); err != nil {
			return nil, err
		}
		out = append(out, node)
	}
	slices.SortFunc(out, func(a, b NUMANode) int { return a.ID - b.ID })
	return out, nil
}

// nodeMemTotal reads "Node <N> MemTotal: <kB> kB" of a node's meminfo.
func nodeMemTotal(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 4 && fields[2] == "MemTotal:" {
			kb, err := strconv.ParseUint(fields[3], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: MemTotal %q: %w", path, fields[3], err)
			}
			return kb * 1024, nil
		}
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no MemTotal", path)
}

// nodeHugePages reads a node's huge page pools; a node without the
// directory has none.
func nodeHugePages(dir string) ([]HugePages, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []HugePages
	for _, e := range entries {
		kb, ok := strings.CutPrefix(e.Name(), "hugepages-")
		if kb, ok = strings.CutSuffix(kb, "kB"); !ok {
			continue
		}
		size, err := strconv.ParseUint(kb, 10, 64)
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "nr_hugepages"))
		if err != nil {
			return nil, err
		}
		pages, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: nr_hugepages: %w", e.Name(), err)
		}
		out = append(out, HugePages{PageSizeKiB: size, Pages: pages})
	}
	return out, nil
}
