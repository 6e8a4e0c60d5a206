#!/usr/bin/env bash
# prepare-host.sh: make a fresh Debian 12 machine ready to build, run and test
# the kubelet: install the packages, start dockerd if it does not answer,
# unpack Docker Engine 26 for the tests' private daemons (scripts/docker26.sh;
# nothing installed) and build the local images (scripts/build-images.sh).
# Idempotent; run as root.
#
# A running dockerd is never restarted. A dockerd started here runs in the
# background (nohup), logs to /var/log/dockerd-kubelet-dockershim.log and
# writes its pid to /var/run/docker.pid (dockerd's own pid file).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

PACKAGES=(
	docker.io containernetworking-plugins busybox-static docker-registry
	apache2-utils openssl iptables conntrack containerd iproute2
	ca-certificates git e2fsprogs mount util-linux dbus-daemon
)
DOCKERD_LOG=/var/log/dockerd-kubelet-dockershim.log
DOCKERD_PID=/var/run/docker.pid

kds_require_root "$@"

install_packages() {
	local missing=() p
	for p in "${PACKAGES[@]}"; do
		if [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) != "install ok installed" ]]; then
			missing+=("$p")
		fi
	done
	if ((${#missing[@]} == 0)); then
		kds_log "packages: all installed"
		return
	fi
	kds_log "packages: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${missing[@]}" >/dev/null
}

start_dockerd() {
	if kds_docker_answers; then
		kds_log "dockerd: already answering"
		return
	fi
	command -v dockerd >/dev/null || kds_die "dockerd not found after installing docker.io"
	kds_log "dockerd: not answering; starting it (log: $DOCKERD_LOG)"
	nohup dockerd --pidfile "$DOCKERD_PID" >>"$DOCKERD_LOG" 2>&1 </dev/null &
	local pid=$! i
	for ((i = 0; i < 60; i++)); do
		if kds_docker_answers; then
			kds_log "dockerd: answering (pid $pid)"
			return
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 1
	done
	tail -n 20 "$DOCKERD_LOG" >&2 || true
	kds_die "dockerd did not answer within 60s (see $DOCKERD_LOG)"
}

install_packages
# The regular (dynamic) busybox conflicts with busybox-static: fetch its files only.
kds_log "busybox (dynamic): $(kds_dynamic_busybox)"
start_dockerd
kds_log "docker 26 (private daemons of the tests): $("$KDS_SCRIPTS/docker26.sh")"
kds_ensure_go
"$KDS_SCRIPTS/build-images.sh"
