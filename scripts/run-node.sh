#!/usr/bin/env bash
# run-node.sh: prepare the machine, build bin/kubelet and run a standalone node in
# the foreground: the kubelet with the built-in dockershim, static pods from
# /etc/kubernetes/manifests (the examples in configs/manifests are copied there
# when the directory is empty), configs/kubelet-config.yaml as --config. Run as root.
# Stop it with Ctrl-C: the pods keep running in Docker, as with any kubelet.
#
# Then: curl -s 127.0.0.1:10248/healthz; curl -s --unix-socket /var/lib/kubelet/kubelet-local.sock http://local/pods; docker ps
# Extra arguments are passed to the kubelet, e.g. --v=4.
# Like upstream's kubelet at protectKernelDefaults' default (false), the kubelet
# sets the kernel tunables it needs (vm/overcommit_memory=1, kernel/panic=10,
# kernel/panic_on_oops=1, ...) on this machine.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

MANIFESTS=/etc/kubernetes/manifests

kds_require_root "$@"
"$KDS_SCRIPTS/prepare-host.sh"
kds_build_kubelet
kds_install_cni_conf /etc/cni/net.d
mkdir -p "$MANIFESTS"
if [[ -z $(ls -A "$MANIFESTS") ]]; then
	install -m 644 "$KDS_ROOT"/configs/manifests/* "$MANIFESTS/"
	kds_log "installed the example static pods into $MANIFESTS"
fi
exec "$KDS_ROOT/bin/kubelet" --config="$KDS_ROOT/configs/kubelet-config.yaml" \
	--cni-bin-dir=/usr/lib/cni --cni-conf-dir=/etc/cni/net.d \
	--pod-infra-container-image=registry.k8s.io/pause:3.10 "$@"
