// Package auth guards the kubelet API on :10250 the way the upstream kubelet does:
//
//   - ServingTLSConfig builds the server's TLS configuration (TLS 1.2 or newer):
//     the serving certificate comes from --tls-cert-file/--tls-private-key-file
//     (reloaded when the files change), or from a certificate signing request
//     (serverTLSBootstrap, signer kubernetes.io/kubelet-serving, rotated by
//     client-go's certificate manager), or from a self-signed pair created once
//     in the certificate directory (kubelet.crt, kubelet.key).
//   - Auth authenticates each request (x509 client certificates against
//     --client-ca-file, bearer tokens through the TokenReview API, anonymous
//     only when enabled) and authorizes it through the SubjectAccessReview
//     API with the upstream attributes: resource nodes, name the node, and a
//     subresource chosen by path (stats, metrics, log, checkpoint, pods,
//     healthz, configz, else proxy). Answers of both webhooks are cached for
//     the configured TTLs. A refused request gets 401 or 403 and never reaches
//     the handler.
//
// Typical use (internal/app):
//
//	a, err := auth.New(auth.Options{Client: client, NodeName: node, ClientCAFile: caFile,
//		WebhookAuthnEnabled: true, WebhookAuthnCacheTTL: 2 * time.Minute,
//		AuthorizationMode: auth.ModeWebhook, WebhookAuthzAuthorizedTTL: 5 * time.Minute,
//		WebhookAuthzUnauthorizedTTL: 30 * time.Second, Logger: logger})
//	go a.Run(ctx)
//	tlsConfig, err := auth.ServingTLSConfig(ctx, auth.ServingOptions{CertDir: pkiDir, NodeName: node, ...})
//	// serve handler a.Filter(mux) with tlsConfig
//
// It imports no other internal package; internal/kubeletserver and
// internal/app may import it.
package auth
