// Package clientcert gives the kubelet its API server credentials: TLS
// bootstrap (a client certificate requested with a bootstrap kubeconfig
// through the CertificateSigningRequest API) and client certificate rotation
// (a client-go certificate.Manager renewing the certificate before it expires,
// with the connections of the returned client re-established on every
// rotation). It follows the upstream kubelet (pkg/kubelet/certificate/bootstrap
// and the kubelet client certificate manager) on the published client-go
// certificate machinery.
//
// Only internal/app imports it; it imports nothing of this module.
//
// Usage:
//
//	opts := clientcert.Options{
//		KubeconfigPath:          "/etc/kubernetes/kubelet.conf",
//		BootstrapKubeconfigPath: "/etc/kubernetes/bootstrap-kubelet.conf",
//		CertDir:                 "/var/lib/kubelet/pki",
//		NodeName:                "node-1",
//		RotateCertificates:      true,
//		Logger:                  logger,
//	}
//	if err := clientcert.Bootstrap(ctx, opts); err != nil { // no-op with a valid kubeconfig
//		return err
//	}
//	cfg, err := clientcert.NewClientConfig(ctx, opts) // rotation runs until ctx ends
//	if err != nil {
//		return err
//	}
//	client, err := kubernetes.NewForConfig(cfg)
//
// On disk (as upstream): CertDir/kubelet-client-<timestamp>.pem holds a
// certificate and its key, CertDir/kubelet-client-current.pem links to the one
// in use, CertDir/kubelet-client.key.tmp holds the key of a request still
// waiting for approval (so a restart reuses the key and the request), and the
// kubeconfig written by Bootstrap (mode 0600) names kubelet-client-current.pem
// as client-certificate and client-key.
package clientcert
