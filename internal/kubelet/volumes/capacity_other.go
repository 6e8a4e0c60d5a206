//go:build !linux

package volumes

func fsSize(string) (int64, bool) { return 0, false }
