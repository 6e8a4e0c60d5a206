#!/usr/bin/env bash
# install.sh: install the kubelet as a systemd service on this machine, as root:
# /usr/bin/kubelet (built from this checkout), /etc/systemd/system/kubelet.service
# and its kubeadm drop-in, /etc/kubernetes/kubelet-config.yaml, the default CNI
# config (when /etc/cni/net.d is empty) and, with --examples, the example static
# pods. Without a kubeadm config (/var/lib/kubelet/config.yaml) it writes
# /etc/default/kubelet so that the service runs a standalone node. When systemd
# runs, the unit is enabled and (re)started. Idempotent.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

kds_require_root "$@"
EXAMPLES=0
[[ ${1:-} == --examples ]] && EXAMPLES=1

kds_build_kubelet
install -D -m 755 "$KDS_ROOT/bin/kubelet" /usr/bin/kubelet
install -D -m 644 "$KDS_ROOT/systemd/kubelet.service" /etc/systemd/system/kubelet.service
install -D -m 644 "$KDS_ROOT/systemd/kubelet.service.d/10-kubeadm.conf" /etc/systemd/system/kubelet.service.d/10-kubeadm.conf
install -D -m 644 "$KDS_ROOT/configs/kubelet-config.yaml" /etc/kubernetes/kubelet-config.yaml
mkdir -p /etc/kubernetes/manifests
kds_install_cni_conf /etc/cni/net.d
if ((EXAMPLES)); then
	install -m 644 "$KDS_ROOT"/configs/manifests/* /etc/kubernetes/manifests/
fi
if [[ ! -f /var/lib/kubelet/config.yaml && ! -f /etc/default/kubelet ]]; then
	cat >/etc/default/kubelet <<'ENV'
# Standalone node (written by scripts/install.sh); kubeadm replaces this setup.
KUBELET_EXTRA_ARGS=--config=/etc/kubernetes/kubelet-config.yaml --cni-bin-dir=/usr/lib/cni,/opt/cni/bin
ENV
	kds_log "wrote /etc/default/kubelet (standalone node)"
fi
if [[ -d /run/systemd/system ]]; then
	systemctl daemon-reload
	systemctl enable kubelet.service
	systemctl restart kubelet.service
	kds_log "kubelet.service enabled and started"
else
	kds_log "systemd is not running here: start /usr/bin/kubelet yourself"
fi
