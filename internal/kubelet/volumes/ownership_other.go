//go:build !linux

package volumes

// changeOwnership needs Linux (O_PATH descriptors and /proc/self/fd).
func changeOwnership(string, int, bool) error { return errNotLinux }
