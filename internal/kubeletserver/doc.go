// Package kubeletserver serves the kubelet's HTTP endpoints. Today that is the local
// one on --healthz-bind-address:--healthz-port (127.0.0.1:10248): /healthz, /pods (the
// pods this node runs, with their status, for loopback clients only) and /metrics. The
// authenticated kubelet API on :10250 comes with the cluster work.
//
// It imports no other internal package; internal/app wires it.
package kubeletserver
