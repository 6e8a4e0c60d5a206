#!/usr/bin/env bash
# run-shim.sh: prepare the machine, build bin/kubelet and run it in
# shim-only mode (--experimental-dockershim): the CRI v1 server over Docker on
# unix:///var/run/dockershim.sock, until SIGINT/SIGTERM. Run as root.
#
# If /etc/cni/net.d holds no network config, configs/cni/10-dockershim-bridge.conflist
# is installed there (bridge dockershim0, 10.244.0.0/24, portmap, bandwidth).
# Extra arguments are passed to the kubelet, e.g. --v=4.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

CNI_CONF_DIR=/etc/cni/net.d
CNI_BIN_DIR=/usr/lib/cni

kds_require_root "$@"
"$KDS_SCRIPTS/prepare-host.sh"
kds_build_kubelet
kds_install_cni_conf "$CNI_CONF_DIR"
cd "$KDS_ROOT"

exec bin/kubelet --experimental-dockershim \
	--container-runtime-endpoint=unix:///var/run/dockershim.sock \
	--cni-bin-dir="$CNI_BIN_DIR" \
	--cni-conf-dir="$CNI_CONF_DIR" \
	--pod-infra-container-image=registry.k8s.io/pause:3.10 \
	"$@"
