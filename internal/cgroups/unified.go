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
// kubelet's MemoryQoS sets, the group OOM kill it sets unless
// singleProcessOOMKill, and the swap limit of its memorySwap.
const (
	MemoryMin      = "memory.min"
	MemoryLow      = "memory.low"
	MemoryHigh     = "memory.high"
	MemoryOOMGroup = "memory.oom.group"
	MemorySwapMax  = "memory.swap.max"
)

// unifiedKeys maps each key to its check of a value.
var unifiedKeys = map[string]func(string) error{MemoryMin: byteCount, MemoryLow: byteCount, MemoryHigh: byteCount,
	MemoryOOMGroup: boolFlag, MemorySwapMax: byteCount}

// byteCount accepts "max" or a byte count.
func byteCount(v string) error {
	if v == "max" {
		return nil
	}
	if _, err := strconv.ParseUint(v, 10, 64); err != nil {
		return fmt.Errorf("value %q is neither \"max\" nor a byte count", v)
	}
	return nil
}

// boolFlag accepts "0" or "1".
func boolFlag(v string) error {
	if v != "0" && v != "1" {
		return fmt.Errorf("value %q is neither \"0\" nor \"1\"", v)
	}
	return nil
}

// CheckUnified checks CRI unified resources: known keys (UnifiedKeys), each
// with its kind of value ("max" or a byte count; memory.oom.group 0 or 1).
func CheckUnified(kv map[string]string) error {
	for _, k := range sortedKeys(kv) {
		check, ok := unifiedKeys[k]
		if !ok {
			return fmt.Errorf("key %q: not one of %v", k, UnifiedKeys())
		}
		if err := check(kv[k]); err != nil {
			return fmt.Errorf("key %q: %w", k, err)
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
