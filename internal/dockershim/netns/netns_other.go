//go:build !linux

package netns

// Pin is not supported off Linux.
func (p *Pins) Pin(id string, pid int) (string, error) { return "", ErrUnsupported }

// Path is always "" off Linux.
func (p *Pins) Path(id string) string { return "" }

// Unpin has nothing to undo off Linux.
func (p *Pins) Unpin(id string) error { return nil }

// GlobalAddrs is not supported off Linux.
func GlobalAddrs(nsPath, ifName string) ([]string, error) { return nil, ErrUnsupported }
