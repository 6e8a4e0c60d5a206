// Package streaming serves the CRI streaming API (exec, attach and port-forward) for
// containers run by Docker. The HTTP side is the published library
// k8s.io/cri-streaming/pkg/streaming; this package supplies its Runtime on top of a
// narrow Docker interface (satisfied by *libdocker.Client) and owns the listener.
//
// Exec is also exported on its own, because the shim's ExecSync runs commands the
// same way (with a timeout that kills the exec'd process).
//
// Only packages under internal/dockershim may import it.
//
// Usage:
//
//	srv, err := streaming.New(streaming.Options{Docker: dockerClient, Logger: logger})
//	if err != nil {
//		return err
//	}
//	if err := srv.Start(ctx); err != nil { // listens now; serves until ctx is done
//		return err
//	}
//	defer srv.Close()
//	resp, err := srv.GetExec(&runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"sh"}, Stdin: true, Stdout: true, Stderr: true})
//	// resp.Url is an absolute http:// URL a remotecommand client can stream from.
package streaming
