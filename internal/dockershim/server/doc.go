// Package server runs the dockershim's CRI gRPC server on a unix socket:
// it parses the endpoint, replaces a stale socket file (never a live one),
// sets the socket's permissions, registers the CRI RuntimeService and
// ImageService, and serves until Close or until the Start context ends.
//
// Only internal/app imports this package. It imports internal/logging for
// its interceptors and knows the shim only through the cri-api server
// interfaces.
//
// The lifecycle follows etcd's embed package:
//
//	srv, err := server.Start(ctx, server.Options{
//		Endpoint: "unix:///var/run/dockershim.sock",
//		Runtime:  shim, // runtimeapi.RuntimeServiceServer
//		Image:    shim, // runtimeapi.ImageServiceServer
//		Logger:   logger,
//	})
//	if err != nil {
//		return err
//	}
//	defer srv.Close()
//	select {
//	case <-srv.Ready():
//	case err := <-srv.Err():
//		return err
//	}
package server
