package faultinject

// KillFile is the file next to the executable that names the point at which
// a -tags faultinject build kills itself with SIGKILL (no deferred cleanup,
// no flush: a crash, a power cut or the OOM killer at that point).
const KillFile = "faultinject-kill"
