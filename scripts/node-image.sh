#!/usr/bin/env bash
# node-image.sh: build the image of the node containers (systemd as PID 1,
# its own dockerd and containerd; a test puts this kubelet in), offline:
#
#   kubelet-dockershim/node-base:bookworm  a Debian 12 root made with
#                                          debootstrap (variant minbase plus
#                                          $PACKAGES), imported with
#                                          `docker import` (no registry is
#                                          reachable where the tests run)
#   kubelet-dockershim/node:bookworm       images/node/Dockerfile on that base:
#                                          units that cannot work in a
#                                          container masked, docker and
#                                          containerd enabled, dockerd's config
#
# Each image carries the label io.kubelet-dockershim.content-hash, the sha256
# of its inputs: for the base, the suite, the mirror, the package list and the
# functions that make the root; for the node image, the base image's ID,
# images/node and this script. An image whose label matches is left alone, so
# a run with both images current takes about a second. The root's tarball is
# kept in $KDS_CACHE_DIR/node-image (and debootstrap's .debs next to it): a
# removed base image is imported again without debootstrap.
#
# The mirror is the one the host's apt uses for the suite
# (/etc/apt/sources.list.d/*.sources, /etc/apt/sources.list); NODE_IMAGE_MIRROR
# overrides it. Needs root, a dockerd that answers and debootstrap (installed
# here when missing). Concurrent runs wait for each other (flock).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

SUITE=bookworm
BASE_TAG=kubelet-dockershim/node-base:$SUITE
NODE_TAG=kubelet-dockershim/node:$SUITE
NODE_CONTEXT=$KDS_ROOT/images/node
CACHE=$KDS_CACHE_DIR/node-image
HASH_LABEL=io.kubelet-dockershim.content-hash
# What minbase lacks for systemd as PID 1, a dockerd with its containerd and
# runc, and a kubelet in docker mode (iptables, CNI plugins, nsenter).
PACKAGES=(
	systemd systemd-sysv dbus
	docker.io containerd runc iptables iproute2 containernetworking-plugins
	ca-certificates procps kmod mount util-linux
)

kds_require_root "$@"
kds_docker_answers || kds_die "dockerd does not answer (run scripts/prepare-host.sh)"

# image_field IMAGE TEMPLATE: inspect output, empty when the image is absent.
image_field() { docker image inspect -f "$2" "$1" 2>/dev/null || true; }
image_hash() { image_field "$1" "{{ index .Config.Labels \"$HASH_LABEL\" }}"; }
image_id() { image_field "$1" '{{.Id}}'; }

# make_rootfs DIR MIRROR: debootstrap the root into DIR, then drop what a
# node never reads (apt's lists and .debs, documentation, locales) and the
# programs of docker.io and containerd it never runs (libnetwork's test tools,
# the v1 shims: Docker 20.10 runs containers with io.containerd.runc.v2).
make_rootfs() {
	local dir=$1 mirror=$2
	kds_debootstrap "$SUITE" "$dir" "$mirror" "$CACHE" "${PACKAGES[@]}"
	rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin "$dir"/var/cache/apt/archives/*.deb \
		"$dir"/usr/share/man/* "$dir"/usr/share/info/* "$dir"/usr/share/locale/*
	find "$dir/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
	rm -f "$dir"/usr/bin/dnet "$dir"/usr/sbin/ovrouter "$dir"/usr/bin/containerd-shim \
		"$dir"/usr/bin/containerd-shim-runc-v1
}

# ensure_debootstrap: install debootstrap when it is missing.
ensure_debootstrap() {
	command -v debootstrap >/dev/null 2>&1 && return
	kds_log "installing debootstrap"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq debootstrap >/dev/null 2>&1 || {
		apt-get update -qq
		apt-get install -y -qq debootstrap >/dev/null
	}
}

# build_base: kubelet-dockershim/node-base, from the cached tarball of the
# root when there is one for the current hash, else from a new debootstrap.
build_base() {
	local mirror hash tarball old status=up-to-date
	mirror=${NODE_IMAGE_MIRROR:-$(kds_debian_mirror)}
	hash=$({
		echo "$SUITE $mirror ${PACKAGES[*]}"
		declare -f make_rootfs kds_debootstrap
	} | sha256sum | cut -d' ' -f1)
	tarball=$CACHE/rootfs-$SUITE-${hash:0:16}.tar
	old=$(image_id "$BASE_TAG")
	if [[ $(image_hash "$BASE_TAG") != "$hash" ]]; then
		if [[ ! -s $tarball ]]; then
			ensure_debootstrap
			local root=$CACHE/rootfs.tmp
			rm -rf "$root" "$tarball.tmp"
			kds_log "debootstrap $SUITE from $mirror (a few minutes; log: $CACHE/debootstrap.log)"
			make_rootfs "$root" "$mirror"
			tar --numeric-owner --xattrs -C "$root" -cf "$tarball.tmp" .
			rm -rf "$root"
			mv "$tarball.tmp" "$tarball"
			# Tarballs of other hashes are stale.
			find "$CACHE" -maxdepth 1 -name "rootfs-$SUITE-*.tar" -not -path "$tarball" -delete
		fi
		docker import --change "LABEL $HASH_LABEL=$hash" --change 'CMD ["/sbin/init"]' \
			"$tarball" "$BASE_TAG" >/dev/null
		status=imported
	fi
	report "$status" "$BASE_TAG" "$old"
}

# build_node: kubelet-dockershim/node from images/node on the base.
build_node() {
	local hash old status=up-to-date
	hash=$({
		image_id "$BASE_TAG"
		sha256sum <"$0"
		(cd "$NODE_CONTEXT" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
		(cd "$NODE_CONTEXT" && find . -print0 | LC_ALL=C sort -z | xargs -0 stat -c '%n %a')
	} | sha256sum | cut -d' ' -f1)
	old=$(image_id "$NODE_TAG")
	if [[ $(image_hash "$NODE_TAG") != "$hash" ]]; then
		local log=$CACHE/build.log
		# The legacy builder: no buildx plugin needed, and the local base
		# is used as it is (never pulled).
		if ! DOCKER_BUILDKIT=0 docker build -q --force-rm --label "$HASH_LABEL=$hash" -t "$NODE_TAG" \
			"$NODE_CONTEXT" >"$log" 2>&1; then
			cat "$log" >&2
			kds_die "docker build of $NODE_TAG failed"
		fi
		status=built
	fi
	report "$status" "$NODE_TAG" "$old"
}

# report STATUS TAG OLD_ID: print the result and drop the replaced image
# (ours: same tag, our label) unless a container or another tag uses it.
report() {
	local id
	id=$(image_id "$2")
	if [[ -n $3 && $3 != "$id" ]]; then
		docker rmi "$3" >/dev/null 2>&1 || true
	fi
	printf 'node-image: %-10s %s (%s)\n' "$1" "$2" "${id:7:12}"
}

mkdir -p "$CACHE"
exec 9>"$CACHE/lock"
flock 9
build_base
build_node
