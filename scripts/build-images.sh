#!/usr/bin/env bash
# build-images.sh: build the local images the shim and its tests use, offline
# (FROM scratch, no registry):
#
#   kubelet-dockershim/pause:latest          internal/pause, static; also
#   registry.k8s.io/pause:3.10               tagged as the default sandbox image
#   kubelet-dockershim/busybox:latest        busybox-static, symlinked applets;
#   kubelet-dockershim/busybox:local         also tagged :local (not "latest", so
#                                            the default pull policy is
#                                            IfNotPresent: `kubectl create
#                                            deployment --image` runs offline)
#   kubelet-dockershim/busybox-dynamic:latest Debian's dynamic busybox with its
#                                            shared libraries, hard-linked
#                                            applets (behaves like upstream
#                                            images when a path is masked:
#                                            busybox-static's sh runs applets
#                                            in-process, ignoring the mask)
#
# Each image carries the label io.kubelet-dockershim.content-hash, the sha256
# of its inputs (binaries, libraries, this script). An image whose label
# matches is left alone; on a change it is rebuilt and the old image removed.
#
# Needs: a dockerd that answers, go, busybox-static, apt access for the
# dynamic busybox (cached in /var/cache/kubelet-dockershim).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

kds_ensure_go
kds_docker_answers || kds_die "dockerd does not answer (run scripts/prepare-host.sh)"
STATIC_BUSYBOX=/bin/busybox
[[ -x $STATIC_BUSYBOX ]] || kds_die "$STATIC_BUSYBOX missing (apt-get install busybox-static)"
SELF_HASH=$(sha256sum "$0" | cut -d' ' -f1)
HASH_LABEL=io.kubelet-dockershim.content-hash

WORK=$(mktemp -d /tmp/kubelet-dockershim-images.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# hash_inputs FILE...: sha256 over this script and the given files.
hash_inputs() {
	{
		echo "$SELF_HASH"
		sha256sum "$@" | cut -d' ' -f1
	} | sha256sum | cut -d' ' -f1
}

# image_field IMAGE TEMPLATE: inspect output, empty when the image is absent.
image_field() { docker image inspect -f "$2" "$1" 2>/dev/null || true; }
image_hash() { image_field "$1" "{{ index .Config.Labels \"$HASH_LABEL\" }}"; }
image_id() { image_field "$1" '{{.Id}}'; }

# build_image HASH CONTEXT TAG [EXTRA_TAG...]: build CONTEXT as TAG unless TAG
# already has HASH, then point every EXTRA_TAG at the same image.
build_image() {
	local hash=$1 ctx=$2 tag=$3
	shift 3
	local old status=up-to-date
	old=$(image_id "$tag")
	if [[ $(image_hash "$tag") != "$hash" ]]; then
		# The legacy builder: no buildx plugin needed, and FROM scratch
		# needs no registry.
		if ! DOCKER_BUILDKIT=0 docker build -q --force-rm --label "$HASH_LABEL=$hash" -t "$tag" "$ctx" \
			>"$WORK/build.log" 2>&1; then
			cat "$WORK/build.log" >&2
			kds_die "docker build of $tag failed"
		fi
		status=built
	fi
	local id extra
	id=$(image_id "$tag")
	for extra in "$@"; do
		if [[ $(image_id "$extra") != "$id" ]]; then
			docker tag "$tag" "$extra"
			[[ $status == built ]] || status=retagged
		fi
	done
	# The replaced image was ours (same tag, our label); drop it unless a
	# container or another tag still uses it.
	if [[ -n $old && $old != "$id" ]]; then
		docker rmi "$old" >/dev/null 2>&1 || true
	fi
	printf 'build-images: %-10s %s (%s)\n' "$status" "$tag${*:+ $*}" "${id:7:12}"
}

# write_etc ROOT: passwd and group with root, nobody and app (1000:1000).
write_etc() {
	local r=$1
	mkdir -p "$r/etc"
	cat >"$r/etc/passwd" <<-'EOF'
		root:x:0:0:root:/root:/bin/sh
		app:x:1000:1000:app:/home/app:/bin/sh
		nobody:x:65534:65534:nobody:/nonexistent:/bin/false
	EOF
	cat >"$r/etc/group" <<-'EOF'
		root:x:0:
		app:x:1000:
		nobody:x:65534:
	EOF
}

# busybox_context DIR BUSYBOX LINK: a build context whose rootfs has BUSYBOX
# at /bin/busybox and every applet linked to it (LINK: "symlink"|"hardlink").
busybox_context() {
	local ctx=$1 busybox=$2 link=$3
	local r=$ctx/rootfs a
	mkdir -p "$r/bin" "$r/tmp" "$r/root" "$ctx/home/app"
	chmod 1777 "$r/tmp"
	chmod 700 "$r/root"
	install -m 755 "$busybox" "$r/bin/busybox"
	for a in $("$busybox" --list); do
		[[ $a == busybox ]] && continue
		if [[ $link == symlink ]]; then
			ln -sf busybox "$r/bin/$a"
		else
			ln -f "$r/bin/busybox" "$r/bin/$a"
		fi
	done
	write_etc "$r"
	cat >"$ctx/Dockerfile" <<-'EOF'
		FROM scratch
		COPY rootfs/ /
		COPY --chown=1000:1000 home/ /home/
		CMD ["/bin/sh"]
	EOF
}

build_pause() {
	local ctx=$WORK/pause
	mkdir -p "$ctx"
	(cd "$KDS_ROOT" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags '-s -w' \
		-o "$ctx/pause" ./internal/pause)
	# USER as in the upstream pause image: the sandbox needs no privileges.
	cat >"$ctx/Dockerfile" <<-'EOF'
		FROM scratch
		COPY pause /pause
		USER 65535:65535
		ENTRYPOINT ["/pause"]
	EOF
	build_image "$(hash_inputs "$ctx/pause")" "$ctx" kubelet-dockershim/pause:latest registry.k8s.io/pause:3.10
}

build_busybox_static() {
	local hash
	hash=$(hash_inputs "$STATIC_BUSYBOX")
	if [[ $(image_hash kubelet-dockershim/busybox:latest) != "$hash" ]]; then
		busybox_context "$WORK/busybox" "$STATIC_BUSYBOX" symlink
	fi
	build_image "$hash" "$WORK/busybox" kubelet-dockershim/busybox:latest kubelet-dockershim/busybox:local
}

build_busybox_dynamic() {
	local busybox libs lib hash ctx=$WORK/busybox-dynamic
	busybox=$(kds_dynamic_busybox)
	# Shared libraries and the loader, at the paths the loader resolves.
	libs=$(ldd "$busybox" | grep -o '/[^ ]*' | sort -u)
	[[ -n $libs ]] || kds_die "ldd lists no libraries for $busybox: is it the static one?"
	# shellcheck disable=SC2086 # paths have no spaces
	hash=$(hash_inputs "$busybox" $libs)
	if [[ $(image_hash kubelet-dockershim/busybox-dynamic:latest) != "$hash" ]]; then
		busybox_context "$ctx" "$busybox" hardlink
		for lib in $libs; do
			mkdir -p "$ctx/rootfs$(dirname "$lib")"
			cp -L "$lib" "$ctx/rootfs$lib"
		done
	fi
	build_image "$hash" "$ctx" kubelet-dockershim/busybox-dynamic:latest
}

build_pause
build_busybox_static
build_busybox_dynamic
