// Package podsource reads the pods a standalone kubelet runs from its static sources: the
// manifest path (--pod-manifest-path, one file or a directory of files) and the manifest
// URL (--manifest-url). Each source sends its full state as a types.PodUpdate with Op SET
// whenever something changed; the first state is always sent, even when empty, so that
// SeenAllSources turns true.
//
// Manifests are decoded strictly (YAML or JSON, unknown fields are errors), defaulted like
// the API server's v1 defaults and validated. As upstream, a static pod's name gets
// "-<nodeName>" appended, its UID is a hash of the defaulted pod and its source (and node,
// for files), and the annotations kubernetes.io/config.source, config.hash (the UID) and
// config.seen are set. A broken manifest file is logged and skipped; other pods are
// unaffected.
//
// Only the kubelet coordinator (internal/kubelet) and internal/app may import this
// package; it imports internal/kubelet/types only.
//
// Usage:
//
//	src, err := podsource.New(podsource.Options{
//		NodeName:     "node-1",
//		ManifestPath: "/etc/kubernetes/manifests",
//		Logger:       logger,
//	})
//	if err != nil {
//		return err
//	}
//	go src.Run(ctx)
//	for {
//		select {
//		case <-ctx.Done():
//			return nil
//		case u := <-src.Updates():
//			// u.Op == types.SET, u.Source == types.FileSource, u.Pods is the full state.
//		}
//	}
package podsource
