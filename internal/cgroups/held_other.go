//go:build !linux

package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// HeldFiles reads cgroup files; only Linux has cgroups, so elsewhere it just reads
// them anew (see held_linux.go).
type HeldFiles struct{}

// NewHeldFiles returns a reader.
func NewHeldFiles() *HeldFiles { return &HeldFiles{} }

// ReadFile reads path and hands its content to parse.
func (c *HeldFiles) ReadFile(path string, _ time.Time, parse func([]byte) error) error {
	return c.ReadUnheld(path, parse)
}

// ReadUnheld reads path and hands its content to parse.
func (c *HeldFiles) ReadUnheld(path string, parse func([]byte) error) error {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %w", ErrGone, err)
		}
		return err
	}
	return parse(b)
}

// Release does nothing: no file is held.
func (c *HeldFiles) Release(...string) {}

// Prune does nothing: no file is held.
func (c *HeldFiles) Prune(time.Time) {}

// Held is 0: no file is held.
func (c *HeldFiles) Held() int { return 0 }
