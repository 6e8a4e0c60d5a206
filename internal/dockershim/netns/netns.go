package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrUnsupported is returned by Pin where namespaces cannot be pinned.
var ErrUnsupported = errors.New("pinning network namespaces is not supported on this platform")

// Pins is a directory of bind-mounted network namespaces, one file per
// sandbox ID.
type Pins struct {
	dir string
}

// New returns the pins kept in dir, creating it (0700) if needed.
func New(dir string) (*Pins, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("netns pin directory %q must be absolute", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create netns pin directory: %w", err)
	}
	return &Pins{dir: dir}, nil
}

// Dir is the directory holding the pins.
func (p *Pins) Dir() string { return p.dir }

// path is the pin file of id; id must be one plain name.
func (p *Pins) path(id string) (string, error) {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/\x00") {
		return "", fmt.Errorf("invalid sandbox ID %q for a netns pin", id)
	}
	return filepath.Join(p.dir, id), nil
}

// List returns the IDs that have a pin file (mounted or not).
func (p *Pins) List() ([]string, error) {
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		return nil, fmt.Errorf("list netns pins: %w", err)
	}
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		ids = append(ids, e.Name())
	}
	return ids, nil
}
