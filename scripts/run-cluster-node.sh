#!/usr/bin/env bash
# run-cluster-node.sh: a one-machine cluster to try the node with. Prepares the
# machine, builds bin/kubelet, starts the loopback control plane
# (scripts/controlplane.sh up STATE_DIR) and runs the kubelet in the foreground
# joined to it: TLS bootstrap from the control plane's bootstrap token (the
# client certificate lands in /var/lib/kubelet/pki, the kubeconfig at
# STATE_DIR/kubelet.conf), node registration, Lease heartbeats, pods from the
# API server and static pods from /etc/kubernetes/manifests. Run as root.
#
#   sudo ./scripts/run-cluster-node.sh [KUBELET_FLAGS...]
#   # from another shell:
#   set -a; eval "$(./scripts/controlplane.sh env /var/lib/kubelet-dockershim/cluster)"; set +a
#   "$KDS_KUBECTL" get nodes
#   "$KDS_KUBECTL" create deployment web --image=kubelet-dockershim/busybox:local --replicas=3 -- sleep 3600
#
# Ctrl-C stops the kubelet (pods keep running); `./scripts/controlplane.sh down
# STATE_DIR` stops the control plane. Env: KDS_CLUSTER_DIR (default
# /var/lib/kubelet-dockershim/cluster).
# Like upstream's kubelet at protectKernelDefaults' default (false), the kubelet
# sets the kernel tunables it needs (vm/overcommit_memory=1, kernel/panic=10,
# kernel/panic_on_oops=1, ...) on this machine.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

STATE=${KDS_CLUSTER_DIR:-/var/lib/kubelet-dockershim/cluster}

kds_require_root "$@"
"$KDS_SCRIPTS/prepare-host.sh"
kds_build_kubelet
kds_install_cni_conf /etc/cni/net.d
mkdir -p /etc/kubernetes/manifests "$STATE"
"$KDS_SCRIPTS/controlplane.sh" up "$STATE"
exec "$KDS_ROOT/bin/kubelet" --config="$KDS_ROOT/configs/kubelet-config.yaml" \
	--kubeconfig="$STATE/kubelet.conf" --bootstrap-kubeconfig="$STATE/bootstrap-kubelet.conf" \
	--node-ip=127.0.0.1 --cluster-dns=10.96.0.10 --cluster-domain=cluster.local \
	--client-ca-file="$STATE/pki/ca.crt" \
	--cni-bin-dir=/usr/lib/cni --cni-conf-dir=/etc/cni/net.d \
	--pod-infra-container-image=registry.k8s.io/pause:3.10 "$@"
