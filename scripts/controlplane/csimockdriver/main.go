// Command csimockdriver serves upstream's mock CSI driver (Kubernetes' own
// test/e2e/storage/drivers/csi-test/mock, the driver of its csi-mock storage
// tests) on a unix socket, for this project's end-to-end tests: the
// kubernetes-csi hostpath driver is not served by the Go module proxy this
// project builds from. Each gRPC call is logged to stdout as "call <method>".
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock/service"
)

func main() {
	endpoint := flag.String("endpoint", "", "unix socket path to serve CSI on")
	name := flag.String("name", "csi-mock.e2e.example.com", "driver name (also its node ID)")
	flag.Parse()
	if *endpoint == "" {
		log.Fatal("--endpoint is required")
	}
	svc := service.New(service.Config{DisableAttach: true, DriverName: *name, AttachLimit: 2, PermissiveTargetPath: true})
	_ = os.Remove(*endpoint)
	l, err := net.Listen("unix", *endpoint)
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		fmt.Printf("call %s err=%v\n", info.FullMethod, err)
		return resp, err
	}))
	csi.RegisterIdentityServer(srv, svc)
	csi.RegisterControllerServer(srv, svc)
	csi.RegisterNodeServer(srv, svc)
	fmt.Printf("serving %s on %s\n", *name, *endpoint)
	log.Fatal(srv.Serve(l))
}
