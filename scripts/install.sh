#!/usr/bin/env bash
# install.sh: install the kubelet as a systemd service, as root:
#
#   scripts/install.sh [--root DIR] [--examples]    install (idempotent)
#   scripts/install.sh [--root DIR] --rollback      undo: back to upstream's kubelet
#
# Install puts /usr/bin/kubelet (built from this checkout), the unit
# /etc/systemd/system/kubelet.service and its kubeadm drop-in,
# /etc/kubernetes/kubelet-config.yaml and, with --examples, the example static
# pods. Without a kubeadm config (/var/lib/kubelet/config.yaml) it writes
# /etc/default/kubelet so that the service runs a standalone node, and the
# default CNI config (when /etc/cni/net.d is empty); a kubeadm node's pod
# network is its cluster's add-on's.
#
# On a kubeadm node (upstream's kubelet + cri-dockerd) it migrates:
#   - a 10-kubeadm.conf drop-in that kubeadm's packages installed is kept (ours
#     is only installed where none exists); our unit's ExecStart takes the same
#     $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS
#     $KUBELET_EXTRA_ARGS;
#   - /var/lib/kubelet/kubeadm-flags.env (and config.yaml, instance-config.yaml
#     of kubeadm 1.34+): endpoints at cri-dockerd's socket are pointed at the
#     built-in dockershim's (unix:///var/run/dockershim.sock),
#     --container-runtime=remote becomes docker, everything else is kept; each
#     file changed is kept as FILE.pre-kubelet-dockershim;
#   - cri-docker.socket and cri-docker.service, when their unit files exist, are
#     stopped and disabled;
#   - an upstream /usr/bin/kubelet is kept as /usr/bin/kubelet.upstream.
# Every file it replaces is backed up and every file it creates is listed under
# /var/lib/kubelet-dockershim/install, which --rollback reads: it restores the
# upstream kubelet, kubeadm's files and the replaced files, removes the ones
# it created, re-enables and starts cri-docker.socket/.service and restarts
# kubelet.service. Sockets are never removed: cri-dockerd's stays with it.
#
# --root DIR installs into DIR instead of / (every path above is read and
# written under DIR). systemctl (looked up on PATH) runs only when systemd
# runs: DIR/run/systemd/system exists.
#
# Env: KDS_KUBELET_BIN  install this kubelet binary instead of building one
#                       (no Go needed then)
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

ARGS=("$@")
ROOT=/
MODE=install
EXAMPLES=0
while (($#)); do
	case $1 in
	--root) (($# >= 2)) || kds_die "--root needs a directory"; ROOT=$2; shift ;;
	--root=*) ROOT=${1#--root=} ;;
	--examples) EXAMPLES=1 ;;
	--rollback) MODE=rollback ;;
	-h | --help) usage; exit 0 ;;
	*) kds_die "unknown argument $1 (see --help)" ;;
	esac
	shift
done
[[ -d $ROOT ]] || kds_die "--root $ROOT is not a directory"
ROOT=$(cd "$ROOT" && pwd)
[[ $ROOT == / ]] && kds_require_root "${ARGS[@]}"
R=${ROOT%/} # prefix for absolute paths: empty for /

BIN=/usr/bin/kubelet
BIN_BACKUP=/usr/bin/kubelet.upstream
KUBEADM_CONFIG=/var/lib/kubelet/config.yaml
# The files where kubeadm names the node's CRI endpoint; each one install.sh
# rewrites is kept as FILE.pre-kubelet-dockershim.
KUBEADM_FILES=(/var/lib/kubelet/kubeadm-flags.env "$KUBEADM_CONFIG" /var/lib/kubelet/instance-config.yaml)
BACKUP_SUFFIX=.pre-kubelet-dockershim
STATE=/var/lib/kubelet-dockershim/install
CREATED=$STATE/created                   # files install.sh created, one a line
CRI_DOCKER_UNITS=$STATE/cri-docker-units # units it stopped and disabled
SHIM_ENDPOINT=unix:///var/run/dockershim.sock
# cri-dockerd's default socket, as kubeadm writes it (with or without unix://).
CRI_DOCKERD_RE='(unix://)?/(var/)?run/cri-dockerd\.sock'
UNIT_DIRS=(/etc/systemd/system /usr/lib/systemd/system /lib/systemd/system)

systemd_runs() { [[ -d $R/run/systemd/system ]]; }
# ours FILE: whether FILE came from this project (binary or unit file).
ours() { grep -qaF kubelet-dockershim "$R$1"; }
listed() { [[ -f $R$2 ]] && grep -qxF "$1" "$R$2"; }
record() { listed "$1" "$2" || { mkdir -p "$R$STATE" && echo "$1" >>"$R$2"; }; }

# place SRC DEST MODE [BACKUP]: install SRC as DEST. A DEST that is not ours is
# backed up first (to BACKUP, default the state dir); a new DEST is recorded.
place() {
	local src=$1 dest=$2 mode=$3 backup=${4:-$STATE/backup$2}
	if [[ -e $R$dest ]]; then
		if ! ours "$dest" && ! listed "$dest" "$CREATED"; then
			install -D -m "$(stat -c %a "$R$dest")" "$R$dest" "$R$backup"
			kds_log "kept the original $dest as $backup"
		fi
	else
		record "$dest" "$CREATED"
	fi
	install -D -m "$mode" "$src" "$R$dest"
}

# kubeadm_dropin: the path of a 10-kubeadm.conf drop-in that is not ours.
kubeadm_dropin() {
	local d
	for d in "${UNIT_DIRS[@]}"; do
		if [[ -f $R$d/kubelet.service.d/10-kubeadm.conf ]] && ! ours "$d/kubelet.service.d/10-kubeadm.conf"; then
			echo "$d/kubelet.service.d/10-kubeadm.conf"
			return 0
		fi
	done
	return 1
}

install_kubelet_binary() {
	local src=${KDS_KUBELET_BIN:-}
	if [[ -z $src ]]; then
		kds_build_kubelet
		src=$KDS_ROOT/bin/kubelet
	fi
	[[ -x $src ]] || kds_die "KDS_KUBELET_BIN=$src is not an executable"
	place "$src" "$BIN" 755 "$BIN_BACKUP"
}

install_units() {
	local dropin
	place "$KDS_ROOT/systemd/kubelet.service" /etc/systemd/system/kubelet.service 644
	if dropin=$(kubeadm_dropin); then
		kds_log "keeping kubeadm's drop-in $dropin"
	else
		place "$KDS_ROOT/systemd/kubelet.service.d/10-kubeadm.conf" \
			/etc/systemd/system/kubelet.service.d/10-kubeadm.conf 644
	fi
}

install_configs() {
	local cni=/etc/cni/net.d/10-dockershim-bridge.conflist m
	place "$KDS_ROOT/configs/kubelet-config.yaml" /etc/kubernetes/kubelet-config.yaml 644
	mkdir -p "$R/etc/kubernetes/manifests"
	if ((EXAMPLES)); then
		for m in "$KDS_ROOT"/configs/manifests/*; do
			place "$m" "/etc/kubernetes/manifests/$(basename "$m")" 644
		done
	fi
	if [[ -f $R$KUBEADM_CONFIG ]]; then
		# A kubeadm node's pod network is its cluster's add-on's, also
		# before the add-on has written its config: ours would come first.
		return 0
	fi
	if [[ ! -e $R$cni ]]; then
		kds_install_cni_conf "$R/etc/cni/net.d"
		[[ -e $R$cni ]] && record "$cni" "$CREATED"
	fi
	if [[ ! -f $R/etc/default/kubelet ]]; then
		mkdir -p "$R/etc/default"
		cat >"$R/etc/default/kubelet" <<'ENV'
# Standalone node (written by scripts/install.sh); kubeadm replaces this setup.
KUBELET_EXTRA_ARGS=--config=/etc/kubernetes/kubelet-config.yaml --cni-bin-dir=/usr/lib/cni,/opt/cni/bin
ENV
		record /etc/default/kubelet "$CREATED"
		kds_log "wrote /etc/default/kubelet (standalone node)"
	fi
}

# migrate_kubeadm_files: point kubeadm's runtime endpoint at the built-in
# dockershim where it names cri-dockerd's socket: as flags in kubeadm-flags.env
# (kubeadm before NodeLocalCRISocket) and as containerRuntimeEndpoint in
# config.yaml and instance-config.yaml (kubeadm with it, 1.34+, where
# `kubeadm upgrade` rebuilds config.yaml from instance-config.yaml).
migrate_kubeadm_files() {
	local p f tmp
	for p in "${KUBEADM_FILES[@]}"; do
		f=$R$p
		if [[ ! -f $f ]] || ! grep -qE "$CRI_DOCKERD_RE" "$f"; then
			continue
		fi
		cp -p "$f" "$f$BACKUP_SUFFIX"
		tmp=$(mktemp "$f.XXXXXX")
		sed -E -e "s#$CRI_DOCKERD_RE#$SHIM_ENDPOINT#g" \
			-e 's#--container-runtime(=|[[:space:]]+)remote#--container-runtime=docker#g' "$f" >"$tmp"
		chmod --reference="$f" "$tmp"
		mv "$tmp" "$f"
		kds_log "$p: cri-dockerd's endpoint is now $SHIM_ENDPOINT (original: $p$BACKUP_SUFFIX)"
	done
}

# find_cri_docker_units: record the cri-dockerd units whose unit files exist.
find_cri_docker_units() {
	local u d
	for u in cri-docker.socket cri-docker.service; do
		for d in "${UNIT_DIRS[@]}"; do
			if [[ -f $R$d/$u ]]; then
				record "$u" "$CRI_DOCKER_UNITS"
				break
			fi
		done
	done
}

do_install() {
	local units=()
	install_kubelet_binary
	install_units
	install_configs
	migrate_kubeadm_files
	find_cri_docker_units
	if [[ -f $R$CRI_DOCKER_UNITS ]]; then
		mapfile -t units <"$R$CRI_DOCKER_UNITS"
	fi
	if ! systemd_runs; then
		kds_log "systemd is not running here: start $BIN yourself"
		return 0
	fi
	systemctl daemon-reload
	if ((${#units[@]})); then
		# The socket first, so that it cannot start the service again.
		systemctl stop "${units[@]}"
		systemctl disable "${units[@]}"
		kds_log "stopped and disabled ${units[*]}"
	fi
	systemctl enable kubelet.service
	systemctl restart kubelet.service
	kds_log "kubelet.service enabled and started"
}

# restore FROM TO: move a backup back in place.
restore() {
	if [[ -e $R$1 ]]; then
		mkdir -p "$(dirname "$R$2")"
		mv -f "$R$1" "$R$2"
		kds_log "restored $2"
	fi
}

do_rollback() {
	local units=() f d
	[[ -d $R$STATE || -e $R$BIN_BACKUP ]] ||
		kds_die "nothing to roll back: $STATE does not exist"
	if [[ -f $R$CRI_DOCKER_UNITS ]]; then
		mapfile -t units <"$R$CRI_DOCKER_UNITS"
	fi
	# Drop the enablement links to our unit before the unit file goes.
	if systemd_runs; then
		systemctl disable kubelet.service
	fi
	restore "$BIN_BACKUP" "$BIN"
	for f in "${KUBEADM_FILES[@]}"; do
		restore "$f$BACKUP_SUFFIX" "$f"
	done
	if [[ -f $R$CREATED ]]; then
		while read -r f; do
			[[ -n $f ]] && rm -f "$R$f" && kds_log "removed $f"
		done <"$R$CREATED"
	fi
	if [[ -d $R$STATE/backup ]]; then
		while read -r f; do
			restore "$STATE/backup$f" "$f"
		done < <(cd "$R$STATE/backup" && find . -type f | sed 's#^\.##')
	fi
	rm -rf "$R$STATE"
	if ! systemd_runs; then
		kds_log "rolled back; systemd is not running here: start cri-dockerd and $BIN yourself"
		return 0
	fi
	systemctl daemon-reload
	if ((${#units[@]})); then
		systemctl enable "${units[@]}"
		systemctl start "${units[@]}"
		kds_log "enabled and started ${units[*]}"
	fi
	for d in "${UNIT_DIRS[@]}"; do
		if [[ -f $R$d/kubelet.service ]]; then
			systemctl enable kubelet.service
			systemctl restart kubelet.service
			kds_log "kubelet.service restarted"
			return 0
		fi
	done
	kds_log "rolled back; no kubelet.service unit is left"
}

case $MODE in
install) do_install ;;
rollback) do_rollback ;;
esac
