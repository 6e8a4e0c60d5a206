// Package faultinject marks points in the product's background loops where a test
// build can make the process panic, to test the crash handling of the real binary
// (logging.HandleCrash: the panic logged with its stack, exit status non-zero).
//
// In the product build (without the faultinject build tag) Point is an empty
// function that the compiler inlines away: the binary has no hook and reads
// nothing. Built with -tags faultinject, Point(name) panics when the file
// "faultinject-panic" next to the executable holds name (one line); the test that
// built the binary writes that file. No environment variable or flag is involved.
//
// Any package may import it; it imports nothing of this module.
//
//	for {
//		faultinject.Point("dockershim.events")
//		...
//	}
package faultinject

// TriggerFile is the file next to the executable that names the point to panic at.
const TriggerFile = "faultinject-panic"
