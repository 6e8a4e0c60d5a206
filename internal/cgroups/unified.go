package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// The cgroup v2 files a client may set through CRI's
// LinuxContainerResources.unified: the memory protection and throttle the
// kubelet's MemoryQoS sets.
const (
	MemoryMin  = "memory.min"
	MemoryLow  = "memory.low"
	MemoryHigh = "memory.high"
)

var unifiedKeys = map[string]bool{MemoryMin: true, MemoryLow: true, MemoryHigh: true}

// CheckUnified checks CRI unified resources: known keys (UnifiedKeys) and
// values "max" or a byte count.
func CheckUnified(kv map[string]string) error {
	for _, k := range sortedKeys(kv) {
		if !unifiedKeys[k] {
			return fmt.Errorf("key %q: not one of %v", k, UnifiedKeys())
		}
		if v := kv[k]; v != "max" {
			if _, err := strconv.ParseUint(v, 10, 64); err != nil {
				return fmt.Errorf("key %q: value %q is neither \"max\" nor a byte count", k, v)
			}
		}
	}
	return nil
}

// UnifiedKeys are the keys CheckUnified accepts, sorted.
func UnifiedKeys() []string { return sortedKeys(unifiedKeys) }

// SetUnified writes checked unified resources (CheckUnified) into the
// cgroup2 directory dir, in key order. A removed cgroup matches ErrGone.
func SetUnified(dir string, kv map[string]string) error {
	if err := CheckUnified(kv); err != nil {
		return err
	}
	for _, k := range sortedKeys(kv) {
		f, err := os.OpenFile(filepath.Join(dir, k), os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s: %w", dir, ErrGone)
			}
			return err
		}
		_, err = f.WriteString(kv[k])
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", filepath.Join(dir, k), err)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
