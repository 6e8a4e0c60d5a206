#!/usr/bin/env bash
# conformance-images.sh: provide, offline and under their exact names, every
# image the [Conformance] and [NodeConformance] specs of e2e.test v1.37.1 run
# (the names are those of k8s.io/kubernetes test/utils/image/manifest.go at
# v1.37.1). Nothing is pulled: each image is built here from local files, with
# `docker import` of a root filesystem (no base image, no registry).
#
#   registry.k8s.io/e2e-test-images/agnhost:2.66.1   the real agnhost, built from
#                                        k8s.io/kubernetes/test/images/agnhost
#                                        (scripts/build-conformance.sh), with what
#                                        its subcommands and the specs run in it:
#                                        sh and the usual applets (busybox), bash,
#                                        curl, nc (netcat-openbsd: nc -u), ip, ss,
#                                        dig and getent (see dns_tools), /coredns
#                                        (CoreDNS as scripts/cluster.sh builds it:
#                                        "DNS should support configurable pod DNS
#                                        nameservers" runs /coredns -conf FILE);
#                                        /agnhost-2, /uploads, porter's
#                                        localhost.crt/key, the user
#                                        user-defined-in-image (1000) in
#                                        group-defined-in-image (50000), and
#                                        /var/registry for fake-registry-server
#                                        (pause:testing, a manifest list of the
#                                        project's pause image)
#   registry.k8s.io/e2e-test-images/agnhost:2.55     the same, a distinct image
#   registry.k8s.io/e2e-test-images/nautilus:1.8     agnhost with upstream's
#                                        /nautilus.jpg and /data.json
#                                        (test/images/nautilus/html), CMD
#                                        ["test-webserver"] (port 80), as
#                                        upstream's Dockerfile on agnhost
#   registry.k8s.io/e2e-test-images/busybox:1.37.0-2 upstream's busybox 1.37.0
#                                        (defconfig, hard-linked applets, its
#                                        ash as sh), built from upstream's
#                                        release tarball (see upstream_busybox)
#   registry.k8s.io/e2e-test-images/nonroot:1.5      busybox, USER 1234
#   registry.k8s.io/e2e-test-images/nonewprivs:1.4   busybox + upstream's nnp
#                                        (setuid root, prints its effective UID)
#   registry.k8s.io/e2e-test-images/nginx:1.27.0-2   busybox httpd as `nginx`,
#   registry.k8s.io/e2e-test-images/nginx:1.28.0-2   serving an index on port 80
#   registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1  busybox + Debian's
#                                        glibc `hostname` (hostname -f resolves
#                                        through /etc/hosts as upstream's does),
#                                        dig and getent (see dns_tools)
#   registry.k8s.io/e2e-test-images/sample-apiserver:1.29.2  busybox (upstream's
#                                        base is alpine) + /sample-apiserver
#                                        (k8s.io/sample-apiserver v0.37.1,
#                                        scripts/build-conformance.sh),
#                                        ENTRYPOINT ["/sample-apiserver"]
#   registry.k8s.io/etcd:3.7.0-0         the control plane's static etcd
#                                        (scripts/build-controlplane.sh) at
#                                        /usr/local/bin/etcd (what the aggregator
#                                        spec runs) with /tmp, passwd and group
#                                        (upstream's: distroless static with
#                                        /bin/sh, etcdctl, etcdutl and migrate
#                                        too, which no spec runs)
#   registry.k8s.io/pause:3.10.2         the project's pause image
#                                        (scripts/build-images.sh), re-tagged
#
# Images the specs expect to be unpullable (gcr.io/k8s-authenticated-test/...,
# invalid.registry.k8s.io/...) are deliberately not provided; nor is kitten
# (the ImageVolume spec's: image volumes need a newer Docker than 20.10).
#
# Each image carries the label io.kubelet-dockershim.content-hash (sha256 of its
# root filesystem tarball and settings); an image whose label matches is left
# alone, a changed one is re-imported and the old image removed. Prints the
# image names, one a line, on stdout.
#
# Needs (root): a dockerd that answers, go, apt access (busybox's source from
# Debian 13, and netcat-openbsd's and dig's .debs, fetched into
# $KDS_CACHE_DIR, not installed; curl, gcc and make are installed when
# missing), the Go module proxy (CoreDNS, when not built yet).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

E2E=registry.k8s.io/e2e-test-images
HASH_LABEL=io.kubelet-dockershim.content-hash
PATH_ENV=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
K8S_MODULE=k8s.io/kubernetes@v1.37.1

kds_require_root "$@"
kds_ensure_go
kds_docker_answers || kds_die "dockerd does not answer (run scripts/prepare-host.sh)"
SELF_HASH=$(sha256sum "$0" | cut -d' ' -f1)
CBIN=$("$KDS_SCRIPTS/build-conformance.sh" agnhost nnp sample-apiserver)
# etcd, and the bin dir CoreDNS is built into.
CPBIN=$("$KDS_SCRIPTS/build-controlplane.sh")
# kubelet-dockershim/pause:latest (and the rest of the project's images).
"$KDS_SCRIPTS/build-images.sh" >&2

WORK=$(mktemp -d /tmp/kubelet-dockershim-conformance-images.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

ensure_packages() {
	local missing=() p
	for p in "$@"; do
		[[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == "install ok installed" ]] || missing+=("$p")
	done
	((${#missing[@]} == 0)) && return 0
	kds_log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	apt-get install -y -qq "${missing[@]}" >/dev/null
}

# deb_root PACKAGE: print a directory holding PACKAGE's files (its .deb fetched
# with apt-get download and unpacked under $KDS_CACHE_DIR, not installed).
deb_root() {
	local dir=$KDS_CACHE_DIR/conformance/debs/$1
	if [[ ! -d $dir/root ]]; then
		rm -rf "$dir"
		mkdir -p "$dir/deb"
		if ! (cd "$dir/deb" && apt-get download "$1" >/dev/null 2>&1); then
			apt-get update -qq >/dev/null
			(cd "$dir/deb" && apt-get download "$1" >/dev/null 2>&1) || kds_die "apt-get download $1 failed"
		fi
		dpkg-deb -x "$dir"/deb/"$1"_*.deb "$dir/root.tmp"
		mv "$dir/root.tmp" "$dir/root"
	fi
	echo "$dir/root"
}

# add_program ROOT SRC DEST [DEBROOT...]: SRC at ROOT/DEST (replacing a busybox
# link) with the shared libraries it links, at the paths the loader resolves.
# Libraries are looked up first in the DEBROOTs (unpacked .debs, see
# deb_root), then on the host; one found in a DEBROOT goes to its path in
# the package.
add_program() {
	local root=$1 src=$2 dest=$3 libs lib rel d dirs=() ldpath out
	shift 3
	[[ -x $src ]] || kds_die "$src missing"
	for d in "$@"; do
		mapfile -t -O "${#dirs[@]}" dirs < <(find "$d" -name '*.so*' \( -type f -o -type l \) -printf '%h\n' | sort -u)
	done
	ldpath=$(
		IFS=:
		echo "${dirs[*]}"
	)
	mkdir -p "$root$(dirname "$dest")"
	rm -f "$root$dest"
	install -m 755 "$src" "$root$dest"
	out=$(LD_LIBRARY_PATH=$ldpath ldd "$src" 2>/dev/null || true)
	if grep -q 'not found' <<<"$out"; then
		kds_die "$src: $(grep 'not found' <<<"$out" | tr '\n' ' ')"
	fi
	libs=$(grep -o '/[^ ]*' <<<"$out" || true)
	for lib in $libs; do
		rel=$lib
		for d in "$@"; do
			[[ $lib == "$d"/* ]] && rel=${lib#"$d"}
		done
		[[ -e $root$rel ]] && continue
		mkdir -p "$root$(dirname "$rel")"
		cp -L "$lib" "$root$rel"
	done
}

# dns_tools ROOT: what upstream's DNS specs run in agnhost and
# glibc-dns-testing (dig +search ..., getent hosts NAME): dig of Debian 12's
# bind9-dnsutils, with BIND's libraries and those only BIND uses from their
# .debs (unpacked under $KDS_CACHE_DIR, not installed) and the rest from the
# host (libxml2 brings ICU's data: about 30 MB), and the host's glibc getent
# (libc-bin; the one that matches the host's libc the images carry).
DIG_DEBS=(bind9-dnsutils bind9-libs libuv1 libjemalloc2 libfstrm0 liblmdb0 libmaxminddb0)
dns_tools() {
	local roots=() p
	for p in "${DIG_DEBS[@]}"; do
		roots+=("$(deb_root "$p")")
	done
	add_program "$1" "${roots[0]}/usr/bin/dig" /usr/bin/dig "${roots[@]:1}"
	add_program "$1" /usr/bin/getent /usr/bin/getent
}

# coredns_binary: print the path of CoreDNS as scripts/cluster.sh builds and
# deploys it (the version of its COREDNS_VERSION, go install from the module
# proxy into the control plane's bin dir, that version in coredns.stamp
# beside the bin dir): whichever script runs first builds it for both.
coredns_binary() {
	local version
	version=$(sed -n 's/^COREDNS_VERSION=//p' "$KDS_SCRIPTS/cluster.sh")
	[[ $version == v* ]] || kds_die "no COREDNS_VERSION in scripts/cluster.sh"
	if [[ ! -x $CPBIN/coredns || $(cat "$CPBIN/../coredns.stamp" 2>/dev/null) != "$version" ]]; then
		kds_log "building CoreDNS $version (cold: about 3 min)"
		(cd / && CGO_ENABLED=0 GOBIN=$CPBIN go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@$version") >&2
		echo "$version" >"$CPBIN/../coredns.stamp"
	fi
	echo "$CPBIN/coredns"
}

# upstream_busybox: print the path of busybox 1.37.0 as upstream releases it,
# built here with upstream's default configuration (as the busybox image of
# the e2e specs is) and cached under $KDS_CACHE_DIR. Debian's own busybox
# (any version) will not do: Debian patches ash to drop environment
# variables whose names are not shell identifiers (for debian-installer),
# and "ConfigMap/Secrets should be consumable via the environment"
# ([Conformance]) run `sh -c env` expecting names such as data-1. The source
# is upstream's release tarball as Debian 13 (trixie) carries it (its orig
# tarball, checked against upstream's sha256), not Debian's patched tree.
# Needs gcc, make, bzip2 and the C library headers.
BUSYBOX_VERSION=1.37.0
BUSYBOX_SHA256=3311dff32e746499f4df0d5df04d7eb396382d7e108bb9250e7b519b837043a4
upstream_busybox() {
	local dir=$KDS_CACHE_DIR/conformance/busybox-$BUSYBOX_VERSION
	local bin=$dir/busybox tarball
	if [[ ! -x $bin ]]; then
		ensure_packages gcc make bzip2 libc6-dev
		rm -rf "$dir" && mkdir -p "$dir/src"
		(cd "$dir" && kds_trixie_apt source --download-only busybox) >/dev/null ||
			kds_die "apt-get source busybox (trixie) failed"
		tarball=$dir/busybox_$BUSYBOX_VERSION.orig.tar.bz2
		[[ -f $tarball ]] || kds_die "Debian 13 no longer carries busybox $BUSYBOX_VERSION ($(ls "$dir"))"
		[[ $(sha256sum "$tarball" | cut -d' ' -f1) == "$BUSYBOX_SHA256" ]] ||
			kds_die "$tarball: not upstream's busybox-$BUSYBOX_VERSION.tar.bz2 (sha256 differs)"
		tar -xjf "$tarball" -C "$dir/src" --strip-components=1
		kds_log "building busybox $BUSYBOX_VERSION (upstream's defconfig; about a minute)"
		# tc does not build against current kernel headers (CBQ is gone);
		# no spec runs it.
		(cd "$dir/src" && make defconfig >/dev/null &&
			sed -i 's/^CONFIG_TC=y$/# CONFIG_TC is not set/' .config &&
			make -j"$(nproc)" >build.log 2>&1) || kds_die "busybox build failed: $dir/src/build.log"
		install -m 755 "$dir/src/busybox" "$bin"
		rm -rf "$dir/src" "$dir"/busybox_*
	fi
	echo "$bin"
}

# base_rootfs DIR: upstream's busybox with its libraries, every applet
# hard-linked in /bin (a masked applet path must not mask busybox itself) and
# its ash as sh, bash beside it, passwd and group as in the busybox image,
# /tmp, /var/run, nsswitch.conf.
base_rootfs() {
	local r=$1 busybox a
	busybox=$(upstream_busybox)
	mkdir -p "$r"/{bin,etc,tmp,root,home,proc,sys,dev,var/run,var/www,usr/bin,usr/sbin,usr/local/bin}
	chmod 1777 "$r/tmp"
	chmod 700 "$r/root"
	add_program "$r" "$busybox" /bin/busybox
	for a in $("$busybox" --list); do
		[[ $a == busybox ]] || ln -f "$r/bin/busybox" "$r/bin/$a"
	done
	add_program "$r" /bin/bash /bin/bash
	cat >"$r/etc/passwd" <<-'EOF'
		root:x:0:0:root:/root:/bin/sh
		daemon:x:1:1:daemon:/usr/sbin:/bin/false
		bin:x:2:2:bin:/bin:/bin/false
		sys:x:3:3:sys:/dev:/bin/false
		sync:x:4:100:sync:/bin:/bin/sync
		mail:x:8:8:mail:/var/spool/mail:/bin/false
		www-data:x:33:33:www-data:/var/www:/bin/false
		operator:x:37:37:Operator:/var:/bin/false
		nobody:x:65534:65534:nobody:/home:/bin/false
	EOF
	cat >"$r/etc/group" <<-'EOF'
		root:x:0:
		daemon:x:1:
		bin:x:2:
		sys:x:3:
		adm:x:4:
		tty:x:5:
		disk:x:6:
		wheel:x:10:root
		mail:x:12:
		www-data:x:33:
		operator:x:37:
		staff:x:50:
		users:x:100:
		nogroup:x:65534:
	EOF
	echo 'hosts: files dns' >"$r/etc/nsswitch.conf"
}

# rootfs NAME: print a fresh copy of the base root filesystem.
rootfs() {
	local r=$WORK/root/$1
	cp -a "$WORK/root/.base" "$r"
	echo "$r"
}

image_field() { docker image inspect -f "$2" "$1" 2>/dev/null || true; }

# make_image NAME ROOT [--change LINE]...: import ROOT as NAME unless NAME has
# the same content hash already.
make_image() {
	local name=$1 root=$2 tar hash old id
	shift 2
	tar=$WORK/$(tr '/:' '__' <<<"$name").tar
	# Fixed order and mtimes: identical trees give identical hashes. Everything
	# here is root's but what was chowned on purpose.
	tar --sort=name --mtime=@0 --numeric-owner -C "$root" -cf "$tar" .
	hash=$({
		echo "$SELF_HASH"
		sha256sum "$tar" | cut -d' ' -f1
		printf '%s\n' "$@"
	} | sha256sum | cut -d' ' -f1)
	old=$(image_field "$name" '{{.Id}}')
	if [[ $(image_field "$name" "{{ index .Config.Labels \"$HASH_LABEL\" }}") == "$hash" ]]; then
		kds_log "up-to-date $name (${old:7:12})"
	else
		docker import -c "ENV PATH=$PATH_ENV" -c "LABEL $HASH_LABEL=$hash" "$@" "$tar" "$name" >/dev/null
		id=$(image_field "$name" '{{.Id}}')
		kds_log "imported   $name (${id:7:12})"
		# The replaced image was ours (same name, our label).
		if [[ -n $old ]]; then
			docker rmi "$old" >/dev/null 2>&1 || true
		fi
	fi
	rm -f "$tar"
	echo "$name"
}

# retag SRC NAME: point NAME at the image SRC.
retag() {
	[[ $(image_field "$1" '{{.Id}}') == "$(image_field "$2" '{{.Id}}')" ]] || docker tag "$1" "$2"
	kds_log "tagged     $2 = $1"
	echo "$2"
}

# fake_registry DIR IMAGE REPO TAG: the layout agnhost's fake-registry-server
# serves (/var/registry: REPO/manifests/TAG holds the digest of a manifest
# list, manifests and blobs at sha256/XX/HASH/data), holding IMAGE for
# linux/amd64, as test/images/agnhost/fakeregistryserver/prepare_registry.sh
# lays out upstream's pause.
fake_registry() {
	local dir=$1 image=$2 repo=$3 tag=$4 save=$WORK/save
	mkdir -p "$save"
	docker save "$image" | tar -C "$save" -x
	local config layers=() l
	config=$(sed -E 's/.*"Config":"([^"]+)".*/\1/' "$save/manifest.json")
	mapfile -t layers < <(sed -E 's/.*"Layers":\[([^]]*)\].*/\1/' "$save/manifest.json" | tr ',' '\n' | tr -d '"')
	# put KIND FILE: store FILE as a blob or manifest; prints "DIGEST SIZE".
	put() {
		local kind=$1 file=$2 hash size
		hash=$(sha256sum "$file" | cut -d' ' -f1)
		size=$(stat -c %s "$file")
		mkdir -p "$dir/$repo/$kind/sha256/${hash:0:2}/$hash"
		cp "$file" "$dir/$repo/$kind/sha256/${hash:0:2}/$hash/data"
		echo "sha256:$hash $size"
	}
	local c lj="" sep="" d s m idx
	read -r d s < <(put blobs "$save/$config")
	c="{\"mediaType\":\"application/vnd.docker.container.image.v1+json\",\"size\":$s,\"digest\":\"$d\"}"
	for l in "${layers[@]}"; do
		gzip -n -c "$save/$l" >"$save/layer.gz"
		read -r d s < <(put blobs "$save/layer.gz")
		lj+="$sep{\"mediaType\":\"application/vnd.docker.image.rootfs.diff.tar.gzip\",\"size\":$s,\"digest\":\"$d\"}"
		sep=,
	done
	m=$save/manifest
	printf '{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json","config":%s,"layers":[%s]}' "$c" "$lj" >"$m"
	read -r d s < <(put manifests "$m")
	idx=$save/index
	printf '{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.list.v2+json","manifests":[{"mediaType":"application/vnd.docker.distribution.manifest.v2+json","size":%s,"digest":"%s","platform":{"architecture":"amd64","os":"linux"}}]}' "$s" "$d" >"$idx"
	read -r d s < <(put manifests "$idx")
	echo "$d" >"$dir/$repo/manifests/$tag"
	rm -rf "$save"
}

ensure_packages curl bash iproute2 hostname
COREDNS=$(coredns_binary)
mkdir -p "$WORK/root"
base_rootfs "$WORK/root/.base"

# busybox, nonroot.
make_image "$E2E/busybox:1.37.0-2" "$(rootfs busybox)" -c 'CMD ["sh"]'
make_image "$E2E/nonroot:1.5" "$(rootfs nonroot)" -c 'CMD ["sh"]' -c 'USER 1234'

# nonewprivs: upstream's nnp, setuid root.
r=$(rootfs nonewprivs)
install -m 4755 "$CBIN/nnp" "$r/usr/local/bin/nnp"
make_image "$E2E/nonewprivs:1.4" "$r" -c 'CMD ["nnp"]'

# nginx: busybox httpd in the foreground on port 80, started as nginx's
# command line starts nginx (the specs only need a server that keeps running).
for v in 1.27.0-2 1.28.0-2; do
	r=$(rootfs "nginx-$v")
	mkdir -p "$r/usr/share/nginx/html"
	printf '<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head>\n<body><h1>Welcome to nginx!</h1></body></html>\n' \
		>"$r/usr/share/nginx/html/index.html"
	cat >"$r/usr/sbin/nginx" <<-'EOF'
		#!/bin/sh
		# A stand-in for nginx (kubelet-dockershim conformance images): busybox
		# httpd in the foreground, whatever the arguments. As PID 1 httpd would
		# ignore SIGTERM (no handler); this shell stops it, as nginx stops.
		httpd -f -p 80 -h /usr/share/nginx/html &
		pid=$!
		trap 'kill "$pid"; wait "$pid"; exit 0' TERM INT QUIT
		wait "$pid"
	EOF
	chmod 755 "$r/usr/sbin/nginx"
	make_image "$E2E/nginx:$v" "$r" -c 'CMD ["nginx", "-g", "daemon off;"]' -c 'EXPOSE 80'
done

# glibc-dns-testing: Debian's hostname (glibc resolver) instead of busybox's,
# dig, getent.
r=$(rootfs glibc-dns-testing)
add_program "$r" /bin/hostname /bin/hostname
dns_tools "$r"
make_image "$E2E/glibc-dns-testing:2.1.1" "$r" -c 'CMD ["sh"]'

# agnhost.
r=$(rootfs agnhost)
add_program "$r" "$CBIN/agnhost" /agnhost
ln -s agnhost "$r/agnhost-2"
add_program "$r" /usr/bin/curl /usr/bin/curl
add_program "$r" "$(deb_root netcat-openbsd)/bin/nc.openbsd" /usr/bin/nc
rm -f "$r/bin/nc" # busybox's nc has no -u
add_program "$r" /bin/ip /sbin/ip
rm -f "$r/bin/ip"
add_program "$r" /bin/ss /usr/bin/ss
dns_tools "$r"
add_program "$r" "$COREDNS" /coredns
mkdir -p "$r/uploads" "$r/home/user-defined-in-image"
install -m 644 "$(go env GOMODCACHE)/$K8S_MODULE/test/images/agnhost/porter/localhost.crt" "$r/localhost.crt"
install -m 644 "$(go env GOMODCACHE)/$K8S_MODULE/test/images/agnhost/porter/localhost.key" "$r/localhost.key"
echo 'user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh' >>"$r/etc/passwd"
printf 'user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n' >>"$r/etc/group"
chown 1000:1000 "$r/home/user-defined-in-image"
fake_registry "$r/var/registry" kubelet-dockershim/pause:latest pause testing
agnhost_changes=(-c 'ENTRYPOINT ["/agnhost"]' -c 'CMD ["pause"]'
	-c 'EXPOSE 80 8080 8081 9376 5000')
make_image "$E2E/agnhost:2.66.1" "$r" "${agnhost_changes[@]}"
# AgnhostPrev: the same programs, a different image.
echo 2.55 >"$r/.kubelet-dockershim-agnhost-tag"
make_image "$E2E/agnhost:2.55" "$r" "${agnhost_changes[@]}"
rm "$r/.kubelet-dockershim-agnhost-tag"

# nautilus: agnhost (its entrypoint) with upstream's two files, serving them
# (test-webserver: / on port 80).
for f in nautilus.jpg data.json; do
	install -m 644 "$(go env GOMODCACHE)/$K8S_MODULE/test/images/nautilus/html/$f" "$r/$f"
done
make_image "$E2E/nautilus:1.8" "$r" -c 'ENTRYPOINT ["/agnhost"]' -c 'CMD ["test-webserver"]' \
	-c 'EXPOSE 80 8080 8081 9376 5000'

# sample-apiserver: the aggregator specs' API server.
r=$(rootfs sample-apiserver)
add_program "$r" "$CBIN/sample-apiserver" /sample-apiserver
make_image "$E2E/sample-apiserver:1.29.2" "$r" -c 'ENTRYPOINT ["/sample-apiserver"]'

# etcd: the sample-apiserver's storage in the aggregator specs.
r=$WORK/root/etcd
mkdir -p "$r/tmp" "$r/etc"
chmod 1777 "$r/tmp"
add_program "$r" "$CPBIN/etcd" /usr/local/bin/etcd
printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' 'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' \
	'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' >"$r/etc/passwd"
printf '%s\n' 'root:x:0:' 'nobody:x:65534:' 'nonroot:x:65532:' >"$r/etc/group"
make_image registry.k8s.io/etcd:3.7.0-0 "$r" -c 'EXPOSE 2379 2380 4001 7001'

retag kubelet-dockershim/pause:latest registry.k8s.io/pause:3.10.2
