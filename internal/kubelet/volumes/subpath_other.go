//go:build !linux

package volumes

// BindSubPath needs Linux (openat2 and bind mounts).
func BindSubPath(SubPath) (string, error) { return "", errNotLinux }
