# shellcheck shell=bash
# lib.sh: helpers shared by the scripts in this directory. Source it; do not
# run it. Every name it defines starts with kds_ / KDS_.
#
# Env:
#   KDS_CACHE_DIR  where downloaded inputs are kept (default
#                  /var/cache/kubelet-dockershim)

KDS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KDS_SCRIPTS=$KDS_ROOT/scripts
KDS_CACHE_DIR=${KDS_CACHE_DIR:-/var/cache/kubelet-dockershim}

kds_log() { printf '%s: %s\n' "$(basename "$0" .sh)" "$*" >&2; }
kds_die() {
	kds_log "ERROR: $*"
	exit 1
}

kds_require_root() {
	[[ $(id -u) == 0 ]] || kds_die "must run as root (try: sudo $0 $*)"
}

# kds_ensure_go: put Go on PATH (the tarball install lives in /usr/local/go).
kds_ensure_go() {
	if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
		PATH=/usr/local/go/bin:$PATH
		export PATH
	fi
	command -v go >/dev/null 2>&1 || kds_die "go not found (install Go 1.26 to /usr/local/go)"
}

# kds_docker_answers: whether dockerd answers on the default socket.
# kds_spawn PIDFILE LOG CMD...: run CMD in the background in a session of its
# own (a Ctrl-C meant for the caller does not reach it), its output appended
# to LOG, stdin /dev/null. PIDFILE gets the pid, written whole before CMD
# runs (the shell's, which exec hands on to CMD).
kds_spawn() {
	local pidfile=$1 log=$2
	shift 2
	# shellcheck disable=SC2016 # expanded by the inner bash
	setsid bash -c 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && log=$1 && shift && exec "$@" >>"$log" 2>&1 </dev/null' \
		"$pidfile" "$log" "$@" &
}

# kds_tls_registry DIR SEEN_AS ADDR CN DNS_NAME...: what Debian's
# docker-registry needs to serve TLS for the DNS names at ADDR: a CA of its
# own (DIR/ca.crt, ca.key, named CN), a serving certificate signed by it
# (DIR/tls.crt, tls.key; P-256, 30 days), and DIR/config.yml storing the
# images in data/ and naming the files as the registry sees DIR: at SEEN_AS
# (DIR itself, or where a container mounts it).
kds_tls_registry() {
	local dir=$1 seen=$2 addr=$3 cn=$4 san="" n
	shift 4
	for n in "$@"; do san+="${san:+,}DNS:$n"; done
	mkdir -p "$dir/data"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
		-subj "/CN=$cn" -addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign" \
		-keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-subj "/CN=$1" -keyout "$dir/tls.key" -out "$dir/tls.csr" 2>/dev/null
	printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n' "$san" >"$dir/tls.ext"
	openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 30 \
		-extfile "$dir/tls.ext" -out "$dir/tls.crt" 2>/dev/null
	cat >"$dir/config.yml" <<-EOF
		version: 0.1
		log:
		  level: warn
		  accesslog:
		    disabled: true
		storage:
		  filesystem:
		    rootdirectory: $seen/data
		http:
		  addr: $addr
		  tls:
		    certificate: $seen/tls.crt
		    key: $seen/tls.key
	EOF
}

kds_docker_answers() { timeout 10 docker info >/dev/null 2>&1; }

# kds_dynamic_busybox: print the path of the regular, dynamically linked
# busybox of Debian's `busybox` package. That package conflicts with
# busybox-static (which we keep installed), so its .deb is downloaded and
# unpacked under $KDS_CACHE_DIR instead of installed.
kds_dynamic_busybox() {
	local dir=$KDS_CACHE_DIR/busybox-deb
	local bin=$dir/root/bin/busybox
	if [[ ! -x $bin ]]; then
		rm -rf "$dir"
		mkdir -p "$dir/deb"
		# apt-get download runs as _apt when it can; a root-only dir only
		# triggers a harmless warning.
		if ! (cd "$dir/deb" && apt-get download busybox >/dev/null 2>&1); then
			apt-get update -qq >/dev/null
			(cd "$dir/deb" && apt-get download busybox >/dev/null 2>&1) ||
				kds_die "apt-get download busybox failed"
		fi
		dpkg-deb -x "$dir"/deb/busybox_*.deb "$dir/root"
		[[ -x $bin ]] || kds_die "busybox .deb has no bin/busybox"
	fi
	echo "$bin"
}

# kds_trixie_apt ARGS...: apt-get against Debian 13 (trixie) with a private
# configuration and state under $KDS_CACHE_DIR/apt-trixie (binary and source
# indexes, signed by Debian's archive key), leaving the host's bookworm
# sources, lists and installed packages alone. For downloads only
# (`download`, `source --download-only`); the indexes are refreshed when
# missing or older than a day.
kds_trixie_apt() {
	local dir=$KDS_CACHE_DIR/apt-trixie
	local opts=(-o "Dir::Etc::SourceList=$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache")
	mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
	local src='deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main'
	printf '%s\n%s\n' "$src" "${src/#deb /deb-src }" >"$dir/sources.list"
	if [[ -z $(find "$dir/lists" -maxdepth 1 -name '*_Sources*' -mmin -1440 2>/dev/null) ]]; then
		apt-get -qq "${opts[@]}" update >/dev/null || kds_die "apt-get update (trixie) failed"
	fi
	# apt runs downloads as _apt when it can; a root-only directory only
	# triggers a harmless warning.
	local out rc=0
	out=$(apt-get -qq "${opts[@]}" "$@" 2>&1) || rc=$?
	[[ -z $out ]] || grep -v 'Download is performed unsandboxed' <<<"$out" >&2 || true
	return "$rc"
}

# kds_cgroup_mounts: one line per cgroup hierarchy mounted here (cgroup and
# cgroup2 mounts of /proc/self/mountinfo): its mountpoint and its super
# options ("rw,net_cls,net_prio").
kds_cgroup_mounts() {
	awk '$(NF-2) == "cgroup" || $(NF-2) == "cgroup2" { print $5, $NF }' /proc/self/mountinfo
}

# kds_debian_mirror: the first http(s) URI of a Debian archive (".../debian")
# in the host's apt sources, one-line or deb822; the same mirror serves every
# suite (bookworm for the node image, trixie for the VM).
kds_debian_mirror() {
	local uri
	uri=$(grep -rhoE 'https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
		head -n 1 | tr -d ' ') || true
	[[ -n $uri ]] || kds_die "no Debian archive in the host's apt sources (/etc/apt)"
	echo "${uri%/}"
}

# kds_debootstrap SUITE DIR MIRROR CACHE PACKAGE...: a minbase root of SUITE
# with the packages in DIR (niced), its .debs kept in CACHE/debs and its log
# in CACHE/debootstrap.log (its tail shown on failure).
kds_debootstrap() {
	local suite=$1 dir=$2 mirror=$3 cache=$4 include
	shift 4
	include=$(
		IFS=,
		echo "$*"
	)
	mkdir -p "$cache/debs"
	if ! nice -n 10 debootstrap --variant=minbase --include="$include" --cache-dir="$cache/debs" \
		"$suite" "$dir" "$mirror" >"$cache/debootstrap.log" 2>&1; then
		tail -n 30 "$cache/debootstrap.log" >&2
		kds_die "debootstrap failed (log: $cache/debootstrap.log)"
	fi
}

# kds_gofmt_check: fail (listing them) when Go files need gofmt. Testdata is
# left alone: it may hold deliberately malformed files.
kds_gofmt_check() {
	local files unformatted
	files=$(cd "$KDS_ROOT" && find . -name '*.go' -not -path './.git/*' -not -path '*/testdata/*' -not -path './vendor/*')
	[[ -n $files ]] || return 0
	# shellcheck disable=SC2086 # file names have no spaces
	unformatted=$(cd "$KDS_ROOT" && gofmt -l $files)
	if [[ -n $unformatted ]]; then
		printf 'files need gofmt:\n%s\n' "$unformatted" >&2
		return 1
	fi
}

# kds_test_env_up: prepare the machine, make a fresh state dir and export the
# DOCKERSHIM_TEST_* variables the tests read. The pull tests start their own
# htpasswd-protected docker-registry on a free loopback port; registry.sh is
# for trying pulls by hand. Installs an EXIT trap that removes the state dir.
kds_test_env_up() {
	"$KDS_SCRIPTS/prepare-host.sh"
	kds_ensure_go
	KDS_STATE_DIR=$(mktemp -d /tmp/kubelet-dockershim-test.XXXXXX)
	trap kds_test_env_down EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	export DOCKERSHIM_TEST_CNI_BIN_DIR=/usr/lib/cni
	# Root may run in a checkout owned by another user, where git refuses to
	# report VCS status; tests do not need the stamp.
	export GOFLAGS=${GOFLAGS:--buildvcs=false}
	env | grep '^DOCKERSHIM_TEST_' | sort >&2
}

kds_test_env_down() {
	if [[ -n ${KDS_STATE_DIR:-} && -d $KDS_STATE_DIR ]]; then
		rm -rf "$KDS_STATE_DIR"
	fi
}

# kds_install_cni_conf DIR: install the default pod network config into DIR when
# DIR holds no network config yet.
kds_install_cni_conf() {
	local dir=$1
	mkdir -p "$dir"
	if ! compgen -G "$dir/*.conf" >/dev/null &&
		! compgen -G "$dir/*.conflist" >/dev/null &&
		! compgen -G "$dir/*.json" >/dev/null; then
		install -m 644 "$KDS_ROOT/configs/cni/10-dockershim-bridge.conflist" "$dir/"
		kds_log "installed $dir/10-dockershim-bridge.conflist"
	fi
}

# kds_build_kubelet: build bin/kubelet from the checkout.
kds_build_kubelet() {
	kds_ensure_go
	(cd "$KDS_ROOT" && go build -trimpath -o bin/kubelet .)
	kds_log "built $KDS_ROOT/bin/kubelet"
}
