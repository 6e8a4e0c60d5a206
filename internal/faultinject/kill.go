//go:build !faultinject

package faultinject

// Kill does nothing in the product build.
func Kill(string) {}
