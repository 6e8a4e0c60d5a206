#!/usr/bin/env bash
# docker26.sh: unpack Docker Engine 26 (Debian 13's docker.io 26.1 with its
# containerd 1.7 and runc 1.1) under $KDS_CACHE_DIR/docker26, so that tests
# can run private daemons of it beside the host's docker.io 20.10
# (internal/testutil/dockerd, Options.Engine = dockerd.Docker26;
# DOCKERSHIM_TEST_DOCKER=26 runs the shim's integration tests against one).
# Prints the directory holding the dockerd wrapper. Idempotent and fast once
# unpacked; run as root.
#
# Nothing is installed: the .debs are downloaded with a private apt
# configuration (kds_trixie_apt; the host's apt sources stay bookworm's) and
# unpacked with dpkg-deb -x.
#
# glibc: trixie's dockerd, containerd and containerd-shim-runc-v2 need at most
# GLIBC_2.34 and run on bookworm's 2.36 as they are. Its runc (and tini) need
# GLIBC_2.38. Running runc through trixie's loader (ld.so --library-path ...)
# does not work: runc re-executes /proc/self/exe for `runc init`, which is
# then the loader, and the container start fails ("can't copy bootstrap data
# to pipe"). So bin/runc is a copy of trixie's runc whose ELF interpreter and
# RUNPATH name trixie's ld.so, libc6 and libseccomp2 unpacked here (set with
# patchelf, itself unpacked from bookworm's .deb). docker-init is tini-static.
#
# Layout of $KDS_CACHE_DIR/docker26:
#   debs/    the downloaded .debs, removed once unpacked
#   root/    their files
#   tools/   patchelf's files
#   bin/     dockerd (a wrapper that puts bin/ first on PATH, so that dockerd
#            runs this containerd, shim and runc), containerd,
#            containerd-shim-runc-v2, ctr, runc, docker-init, docker-proxy
#   VERSIONS the unpacked packages and versions, written last
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

DIR=$KDS_CACHE_DIR/docker26
TRIXIE_PACKAGES=(docker.io containerd runc tini libc6 libseccomp2)
WANT_MAJOR=26

kds_require_root "$@"

# download_debs: the trixie packages, and patchelf from the host's (bookworm) sources.
download_debs() {
	mkdir -p "$DIR/debs"
	(cd "$DIR/debs" && kds_trixie_apt download "${TRIXIE_PACKAGES[@]}") ||
		kds_die "apt-get download (trixie) ${TRIXIE_PACKAGES[*]} failed"
	if ! (cd "$DIR/debs" && apt-get download patchelf >/dev/null 2>&1); then
		apt-get update -qq >/dev/null
		(cd "$DIR/debs" && apt-get download patchelf >/dev/null 2>&1) || kds_die "apt-get download patchelf failed"
	fi
}

unpack() {
	local deb
	mkdir -p "$DIR/root" "$DIR/tools"
	for deb in "$DIR"/debs/*.deb; do
		if [[ $(basename "$deb") == patchelf_* ]]; then
			dpkg-deb -x "$deb" "$DIR/tools"
		else
			dpkg-deb -x "$deb" "$DIR/root"
		fi
	done
}

# populate_bin: the programs dockerd looks up on PATH, the patched runc and the wrapper.
populate_bin() {
	local r=$DIR/root libdir=$DIR/root/usr/lib/x86_64-linux-gnu p
	local bin=$DIR/bin
	mkdir -p "$bin"
	for p in usr/bin/containerd usr/bin/containerd-shim-runc-v2 usr/bin/ctr usr/sbin/docker-proxy; do
		[[ -x $r/$p ]] || kds_die "$r/$p missing from the unpacked packages"
		ln -sfn "$r/$p" "$bin/$(basename "$p")"
	done
	[[ -x $r/usr/bin/tini-static ]] || kds_die "$r/usr/bin/tini-static missing"
	ln -sfn "$r/usr/bin/tini-static" "$bin/docker-init"
	[[ -e $libdir/ld-linux-x86-64.so.2 && -e $libdir/libc.so.6 && -e $libdir/libseccomp.so.2 ]] ||
		kds_die "trixie's loader, libc or libseccomp missing from $libdir"
	install -m 755 "$r/usr/sbin/runc" "$bin/runc"
	"$DIR/tools/usr/bin/patchelf" --set-interpreter "$libdir/ld-linux-x86-64.so.2" --set-rpath "$libdir" "$bin/runc"
	cat >"$bin/dockerd" <<-EOF
		#!/bin/sh
		# Written by scripts/docker26.sh: Debian 13's dockerd, running the
		# containerd, shim and runc of this directory.
		PATH=$bin:\$PATH
		export PATH
		exec $r/usr/sbin/dockerd "\$@"
	EOF
	chmod 755 "$bin/dockerd"
}

# check: every program runs on this host and dockerd is version 26.
check() {
	local bin=$DIR/bin out p
	out=$("$bin/dockerd" --version) || kds_die "$bin/dockerd --version failed"
	[[ $out == "Docker version $WANT_MAJOR."* ]] || kds_die "trixie's dockerd is not $WANT_MAJOR.x: $out"
	for p in containerd runc docker-init; do
		"$bin/$p" --version >/dev/null 2>&1 || kds_die "$bin/$p --version failed: $("$bin/$p" --version 2>&1 | head -3)"
	done
}

versions() {
	local deb
	for deb in "$DIR"/debs/*.deb; do
		# shellcheck disable=SC2016 # dpkg-deb expands them
		dpkg-deb --show --showformat='${Package} ${Version}\n' "$deb"
	done
}

exec 9>"$KDS_CACHE_DIR/docker26.lock"
flock 9
if [[ ! -f $DIR/VERSIONS ]]; then
	kds_log "unpacking Debian 13's docker.io, containerd and runc into $DIR"
	rm -rf "$DIR"
	mkdir -p "$DIR"
	download_debs
	unpack
	populate_bin
	check
	versions >"$DIR/VERSIONS.tmp"
	rm -rf "$DIR/debs"
	mv "$DIR/VERSIONS.tmp" "$DIR/VERSIONS"
fi
check
echo "$DIR/bin"
