//go:build !faultinject

package faultinject

// Enabled reports whether this is a fault-injection build (-tags faultinject).
const Enabled = false

// Point does nothing in the product build.
func Point(string) {}
