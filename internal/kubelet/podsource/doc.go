// Package podsource reads the pods the kubelet runs from its sources: the manifest path
// (--pod-manifest-path, one file or a directory of files), the manifest URL
// (--manifest-url) and, in a cluster, the API server. Each source sends its full state as
// a types.PodUpdate with Op SET whenever something changed; the first state is always
// sent, even when empty, so that SeenAllSources turns true.
//
// Manifests are decoded (package manifest) strictly (YAML or JSON, unknown fields are
// errors), defaulted like the API server's v1 defaults and validated. As upstream, a static pod's name gets
// "-<nodeName>" appended, its UID is a hash of the defaulted pod and its source (and node,
// for files), and the annotations kubernetes.io/config.source, config.hash (the UID) and
// config.seen are set. A broken manifest file is logged and skipped; other pods are
// unaffected.
//
// With Options.Client set, the API source watches the pods bound to the node (field
// selector spec.nodeName) with a client-go reflector and sends their full set, source
// "api", after its first list and after every change. Each pod is a deep copy of the API
// object with kubernetes.io/config.source=api added; mirror pods are included and left to
// the kubelet. While the API server is unreachable nothing is sent, and a relist after it
// came back replaces the set in one step, so pods never vanish in between.
//
// Only the kubelet coordinator (internal/kubelet) and internal/app may import this
// package; it imports internal/kubelet/container only.
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
