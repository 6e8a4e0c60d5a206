#!/usr/bin/env bash
# node-container.sh: create a node container (systemd as PID 1, its own dockerd
# and containerd, see images/node) on the host's dockerd, the way kind runs its
# nodes. The one definition of a node container's `docker create` arguments:
# scripts/cluster.sh and the tests' internal/testutil/nodecontainer both call it.
#
#   node-container.sh create NAME IMAGE [DOCKER_CREATE_ARGS...]
#
# creates (does not start) container NAME with hostname NAME from IMAGE, the
# extra arguments (labels, --network, -v ...; a --hostname among them wins)
# before the image, and prints its ID. The container is not --privileged (that needs CAP_SYS_RESOURCE, which
# root lacks on some hosts): it gets every capability but CAP_SYS_RESOURCE, no
# seccomp or AppArmor profile, unmasked /proc and /sys paths, every device,
# each of the host's cgroup hierarchies bound read-write on a tmpfs of its own
# at /sys/fs/cgroup (what systemd makes beside them stays in the node),
# /dev/kmsg, tmpfs on /run, /run/lock and /tmp, and /var/lib/docker and
# /var/lib/containerd as anonymous volumes (on the host's filesystem: the
# inner dockerd's overlay2 is not overlay on overlay; `docker rm -v` removes
# them).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
	echo "usage: $0 create NAME IMAGE [DOCKER_CREATE_ARGS...]" >&2
	exit 2
}

if (($# < 3)) || [[ $1 != create ]]; then
	usage
fi
name=$2 image=$3
shift 3
# shellcheck disable=SC2054 # the commas are mount options
args=(create --name "$name" --hostname "$name"
	# Everything --privileged gives but CAP_SYS_RESOURCE.
	--cap-add ALL --cap-drop SYS_RESOURCE
	--security-opt seccomp=unconfined --security-opt apparmor=unconfined
	--security-opt systempaths=unconfined --device-cgroup-rule 'a *:* rwm'
	# The kernel's log, which a kubelet's OOM watcher reads (upstream's
	# refuses to start without it).
	--device /dev/kmsg
	# What systemd needs: its runtime directories on tmpfs, the cgroup
	# hierarchies writable, and to know it is in a container.
	--tmpfs /run --tmpfs /run/lock --tmpfs /tmp -e container=docker
	--tmpfs /sys/fs/cgroup:rw,nosuid,nodev,noexec,mode=755)
mounts=0
while read -r mountpoint _; do
	[[ $mountpoint == /sys/fs/cgroup/* ]] || continue
	args+=(-v "$mountpoint:$mountpoint:rw")
	mounts=$((mounts + 1))
done < <(kds_cgroup_mounts | sort -u -k1,1)
((mounts > 0)) || kds_die "the host mounts no cgroup hierarchy below /sys/fs/cgroup"
# The inner runtimes' state on the host's filesystem.
args+=(-v /var/lib/docker -v /var/lib/containerd "$@" "$image")
docker "${args[@]}"
