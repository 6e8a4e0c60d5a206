// Package faultinject marks points in the product where a test build can make
// the process panic (Point: in background loops, to test the crash handling of
// the real binary, logging.HandleCrash: the panic logged with its stack, exit
// status non-zero) or kill itself with SIGKILL (Kill: between the steps of a
// pod's start, to test that a restart converges).
//
// In the product build (without the faultinject build tag) Point and Kill are
// empty functions that the compiler inlines away: the binary has no hook and
// reads nothing. Built with -tags faultinject, Point(name) panics when the file
// "faultinject-panic" (TriggerFile) next to the executable holds name (one
// line), Kill(name) when "faultinject-kill" (KillFile) does; the test that built
// the binary writes the file. No environment variable or flag is involved.
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
