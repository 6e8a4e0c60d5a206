#!/usr/bin/env bash
# prepare-host.sh: make a fresh Debian 12 machine ready to build, run and test
# the kubelet: install the packages, start dockerd if it does not answer,
# unpack Docker Engine 26 for the tests' private daemons (scripts/docker26.sh;
# nothing installed), build the local images (scripts/build-images.sh) and the
# node container image (scripts/node-image.sh: minutes the first time, about a
# second when its inputs have not changed). Idempotent; run as root.
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
	ca-certificates git e2fsprogs mount util-linux dbus-daemon debootstrap
	# xfs_growfs: the CSI expansion test grows a mounted XFS (online ext4
	# growth needs CAP_SYS_RESOURCE, which root lacks on some hosts).
	xfsprogs
	# systemd-socket-activate and systemd-socket-proxyd: cluster.sh's relay
	# from the nodes to the API server (systemd need not run as PID 1).
	systemd
	# A second OCI runtime for the RuntimeClass tests (registered in their
	# private dockerd only).
	crun
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

# mount_cgroup_hierarchies mounts every v1 hierarchy the kernel has (in
# /proc/self/cgroup) that is mounted nowhere, at /sys/fs/cgroup/<controllers>.
# Such a hierarchy appears when something mounted a controller in another mount
# namespace (systemd in a node container that sees the host's /sys/fs/cgroup
# mounts hugetlb, perf_event and net_cls,net_prio there) and outlives that
# namespace: containerd's shim then cannot load a container's cgroups ("cannot
# find cgroup mount destination") and Docker reports no OOM kill. Mounting the
# controllers here first also keeps it from happening.
mount_cgroup_hierarchies() {
	[[ -d /sys/fs/cgroup/memory ]] || return 0 # cgroup v2: one hierarchy
	local want=() controllers name hier _n enabled remounted=0
	# Hierarchies the kernel lists for this process.
	while IFS=: read -r _ controllers _; do
		[[ -n $controllers && $controllers != name=* ]] && want+=("$controllers")
	done </proc/self/cgroup
	# Enabled controllers in no hierarchy yet (net_cls and net_prio together, as
	# systemd mounts them).
	while read -r name hier _n enabled; do
		[[ $name == \#* || $hier != 0 || $enabled != 1 ]] && continue
		case $name in net_cls | net_prio) name=net_cls,net_prio ;; esac
		want+=("$name")
	done </proc/cgroups
	for controllers in $(printf '%s\n' "${want[@]}" | sort -u); do
		cgroup_mounted "$controllers" && continue
		if [[ ! -d /sys/fs/cgroup/$controllers ]]; then
			if ((!remounted)); then mount -o remount,rw /sys/fs/cgroup && remounted=1; fi
			mkdir -p "/sys/fs/cgroup/$controllers"
		fi
		mount -t cgroup -o "$controllers" cgroup "/sys/fs/cgroup/$controllers" &&
			kds_log "cgroups: mounted the $controllers hierarchy at /sys/fs/cgroup/$controllers"
	done
	if ((remounted)); then mount -o remount,ro /sys/fs/cgroup || true; fi
}

# cgroup_mounted reports whether a cgroup v1 mount holds every controller of
# $1 (comma-separated).
cgroup_mounted() {
	local opts c all
	while read -r opts; do
		all=1
		for c in ${1//,/ }; do [[ ,$opts, == *,"$c",* ]] || all=0; done
		((all)) && return 0
	done < <(kds_cgroup_mounts | awk '{ print $2 }')
	return 1
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
mount_cgroup_hierarchies
# The regular (dynamic) busybox conflicts with busybox-static: fetch its files only.
kds_log "busybox (dynamic): $(kds_dynamic_busybox)"
start_dockerd
kds_log "docker 26 (private daemons of the tests): $("$KDS_SCRIPTS/docker26.sh")"
kds_ensure_go
"$KDS_SCRIPTS/build-images.sh"
"$KDS_SCRIPTS/node-image.sh"
