#!/usr/bin/env bash
# conformance.sh: run upstream's [NodeConformance] e2e specs (e2e.test v1.37.1)
# against this kubelet, offline, on a one-node cluster the script starts and
# stops itself. Run as root:
#
#   sudo ./scripts/conformance.sh [OPTIONS] [OUTPUT_DIR]
#
#   --shard I/N         only shard I of N: a spec belongs to shard
#                       fnv-1a-64(spec text) mod N + 1 (stable across runs).
#                       N=10 gives 25 to 50 specs a shard; measured on 2 busy
#                       cores: shard 1/8 (36 specs) takes 20 minutes, most of
#                       it failing resize specs that wait out 5-minute timeouts
#   --focus REGEX       only the selected specs whose text also matches REGEX
#                       (Go regexp; ad-hoc runs)
#   --skip REGEX        skip specs matching REGEX too (ginkgo --skip semantics)
#   --kubelet this|upstream|cri-dockerd
#                       this: bin/kubelet in docker mode, its built-in dockershim
#                       (default). upstream: upstream's kubelet v1.37.1
#                       (upstream-kubelet, scripts/build-controlplane.sh) on this
#                       project's shim-only mode (bin/kubelet
#                       --experimental-dockershim): the anchor to compare with.
#                       cri-dockerd: upstream's kubelet on cri-dockerd v0.4.3
#                       (built by scripts/build-controlplane.sh), the second
#                       anchor: what a node of upstream's kubelet and cri-dockerd
#                       does on this machine
#   --cluster           the whole [Conformance] suite (not only [NodeConformance])
#                       on a 3-node cluster of scripts/cluster.sh (cluster name
#                       conformance, KDS_CONFORMANCE_PORT_BASE for its ports, pod
#                       network 10.223.0.0/16), started for the run and removed
#                       after it; every image of scripts/conformance-images.sh
#                       loaded into each node, and the registry images
#                       (REGISTRY_IMAGES, pulled with imagePullPolicy Always)
#                       served by the cluster's registry (cluster.sh
#                       --registry-image). Skips: scripts/conformance/skip-cluster.txt
#                       (KDS_CONFORMANCE_SKIP_FILE). Only with --kubelet this
#   --dry-run           list the selected specs (OUTPUT_DIR/specs.txt) and their
#                       count, then stop: no cluster, no images
#   --procs N           ginkgo parallel processes (default 2)
#   -h, --help
#
# OUTPUT_DIR (default _conformance/<UTC time>-<kubelet> in the checkout) gets:
#   summary.txt   first line "N passed, N failed, N skipped (...)", then the
#                 failed specs with the first line of their failure, the slowest
#   junit.xml     ginkgo's JUnit report; report.json its JSON report
#   specs.txt     the specs selected to run (one full spec text a line)
#   ginkgo.log    the console output of the run
#   logs/         kubelet, shim, dockerd, registry and control plane logs
#
# Selection: focus \[NodeConformance\]; skipped are upstream's own exclusions
# for such a cluster (\[Flaky\], \[Disruptive\], \[Feature:...\], \[Alpha\]),
# Windows-only specs, and every regexp of scripts/conformance/skip.txt (each
# with the reason no kubelet passes it on this machine). [Serial] specs run: ginkgo
# runs them one at a time after the parallel ones.
#
# What it sets up (all private, all removed or stopped at exit; Ctrl-C included):
#   - the binaries: bin/kubelet, e2e.test/ginkgo/agnhost
#     (scripts/build-conformance.sh), the control plane
#     (scripts/build-controlplane.sh); the images
#     (scripts/conformance-images.sh, in the host's dockerd)
#   - a private dockerd on $STATE/docker.sock (own bridge, no iptables), loaded
#     with copies of the images: the kubelet sees only its own pods, never the
#     pods of another kubelet on the host's dockerd
#   - the loopback control plane (scripts/controlplane.sh) in $STATE/cluster on
#     ports of its own (below)
#   - the node: the kubelet with TLS bootstrap, its own root dir, cert dir, pod
#     logs dir, --cgroup-root=/kubelet-dockershim-conformance and CNI dirs. Its
#     --node-ip and --address are 10.199.251.1 on kdsconfnode0, a port-less
#     bridge of the harness's (reachable from this host and its pods only):
#     upstream's kubelet refuses a loopback node IP ("nodeIP can't be loopback
#     address": the node gets no address and the API server cannot exec or
#     fetch logs), and both kubelets run on the same address so that their
#     results compare. The pod network is configs/cni/10-dockershim-bridge.conflist
#     with its bridge renamed kdsconf0 and its host-local state in $STATE
#     (10.244.0.0/24 unless KDS_CONFORMANCE_SUBNET says otherwise)
#   - for the image pull specs: Debian's docker-registry on 127.0.0.1:443 (TLS,
#     CA in $STATE) serving registry.k8s.io/e2e-test-images/agnhost:2.66.1, which
#     one spec pulls with PullAlways; an /etc/hosts line
#     "127.0.0.1 registry.k8s.io # kubelet-dockershim-conformance" and
#     /etc/docker/certs.d/registry.k8s.io/kubelet-dockershim-conformance.crt
#     (both removed at exit). The [Serial] private-registry specs run agnhost's
#     fake-registry-server as a host-network pod on port 5000, which binds every
#     address: an iptables INPUT rule (comment kubelet-dockershim-conformance)
#     drops non-loopback packets to port 5000 meanwhile
#   - the kernel tunables a kubelet sets at protectKernelDefaults=false
#     (vm/overcommit_memory, kernel/panic, kernel/panic_on_oops, ...) are
#     restored to their previous values at exit
#
# Env:
#   KDS_CONFORMANCE_STATE    private state dir, wiped at start and kept after the
#                            run for inspection (default
#                            /var/lib/kubelet-dockershim/conformance); one run
#                            at a time holds STATE.lock
#   KDS_CONFORMANCE_SUBNET   pod subnet (default 10.244.0.0/24)
#   KDS_CONFORMANCE_NODE_IP  the node's address (default 10.199.251.1, on
#                            kdsconfnode0); 127.0.0.1 runs this kubelet as
#                            scripts/run-cluster-node.sh does (not upstream's)
#   KDS_CONFORMANCE_TIMEOUT  ginkgo --timeout (default 3h)
#   KDS_CONFORMANCE_SKIP_FILE  the skip list (default scripts/conformance/skip.txt);
#                            /dev/null selects every spec (the dry run of the
#                            results table, docs/conformance.md)
#   KDS_CONFORMANCE_PORT_BASE  ports 127.0.0.1:BASE+n (default 16000): +443
#                            kube-apiserver, +379/+380 etcd, +257 controller-manager,
#                            +259 scheduler, +250 kubelet, +248 kubelet healthz
#
# shellcheck disable=SC2317 # the teardown functions run from the EXIT trap
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

STATE=${KDS_CONFORMANCE_STATE:-/var/lib/kubelet-dockershim/conformance}
SUBNET=${KDS_CONFORMANCE_SUBNET:-10.244.0.0/24}
NODE_IP=${KDS_CONFORMANCE_NODE_IP:-10.199.251.1}
TIMEOUT=${KDS_CONFORMANCE_TIMEOUT:-3h}
PORT_BASE=${KDS_CONFORMANCE_PORT_BASE:-16000}
SKIP_FILE=${KDS_CONFORMANCE_SKIP_FILE:-$KDS_SCRIPTS/conformance/skip.txt}
TAG=kubelet-dockershim-conformance
CGROUP_ROOT=/$TAG
CNI_BRIDGE=kdsconf0
CNI_NETWORK=kds-conformance
DOCKER_BRIDGE=kdsconfdk0
NODE_LINK=kdsconfnode0
PAUSE_IMAGE=registry.k8s.io/pause:3.10.2
E2E=registry.k8s.io/e2e-test-images
# The images the specs run; loaded into the private dockerd.
IMAGES=(
	"$E2E/agnhost:2.66.1" "$E2E/agnhost:2.55" "$E2E/busybox:1.37.0-2" "$E2E/nonroot:1.5"
	"$E2E/nonewprivs:1.4" "$E2E/nginx:1.27.0-2" "$E2E/nginx:1.28.0-2"
	"$E2E/glibc-dns-testing:2.1.1" "$PAUSE_IMAGE"
)
# What the local registry serves (PullAlways in "should be able to pull image"
# and in the Projected PodCertificate mTLS spec).
REGISTRY_IMAGES=("$E2E/agnhost:2.66.1")
DEFAULT_FOCUS='\[NodeConformance\]'
DEFAULT_SKIP='\[Flaky\]|\[Disruptive\]|\[Feature:[^\]]+\]|\[Alpha\]|\[sig-windows\]|\[Windows\]|\[WindowsOnly\]'
TUNABLES=(vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops
	kernel/keys/root_maxkeys kernel/keys/root_maxbytes)

usage() {
	sed -n '2,/^# shellcheck/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
	exit 2
}

ARGS=("$@")
SHARD=1/1 FOCUS="" SKIP="" KUBELET=this DRY_RUN=0 PROCS=2 OUT="" CLUSTER=0
while (($#)); do
	case $1 in
	--shard) SHARD=${2:?}; shift ;;
	--shard=*) SHARD=${1#*=} ;;
	--focus) FOCUS=${2:?}; shift ;;
	--focus=*) FOCUS=${1#*=} ;;
	--skip) SKIP=${2:?}; shift ;;
	--skip=*) SKIP=${1#*=} ;;
	--kubelet) KUBELET=${2:?}; shift ;;
	--kubelet=*) KUBELET=${1#*=} ;;
	--procs) PROCS=${2:?}; shift ;;
	--procs=*) PROCS=${1#*=} ;;
	--dry-run) DRY_RUN=1 ;;
	--cluster) CLUSTER=1 ;;
	-h | --help) usage ;;
	-*) kds_log "unknown option $1"; usage ;;
	*)
		[[ -z $OUT ]] || usage
		OUT=$1
		;;
	esac
	shift
done
[[ $SHARD =~ ^[0-9]+/[0-9]+$ ]] || kds_die "--shard wants I/N"
[[ $KUBELET == this || $KUBELET == upstream || $KUBELET == cri-dockerd ]] || kds_die "--kubelet wants this, upstream or cri-dockerd"
[[ $PROCS =~ ^[1-9][0-9]*$ ]] || kds_die "--procs wants a number"
if [[ $KUBELET != this && $NODE_IP == 127.* ]]; then
	kds_die "upstream's kubelet refuses a loopback node IP (KDS_CONFORMANCE_NODE_IP=$NODE_IP)"
fi
if ((CLUSTER)); then
	[[ $KUBELET == this ]] || kds_die "--cluster runs this kubelet only"
	DEFAULT_FOCUS='\[Conformance\]'
	# Conformance is every spec so tagged, [Serial] and [Disruptive] ones too.
	DEFAULT_SKIP='\[sig-windows\]|\[Windows\]|\[WindowsOnly\]'
	SKIP_FILE=${KDS_CONFORMANCE_SKIP_FILE:-$KDS_SCRIPTS/conformance/skip-cluster.txt}
fi
OUT=${OUT:-$KDS_ROOT/_conformance/$(date -u +%Y%m%dT%H%M%SZ)-$( ((CLUSTER)) && echo cluster || echo "$KUBELET")}

kds_require_root "${ARGS[@]}"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
port() { echo $((PORT_BASE + $1)); }
KDS_APISERVER_PORT=$(port 443) KDS_ETCD_PORT=$(port 379) KDS_ETCD_PEER_PORT=$(port 380)
KDS_CM_PORT=$(port 257) KDS_SCHEDULER_PORT=$(port 259)
export KDS_APISERVER_PORT KDS_ETCD_PORT KDS_ETCD_PEER_PORT KDS_CM_PORT KDS_SCHEDULER_PORT
KUBELET_PORT=$(port 250)
HEALTHZ_PORT=$(port 248)
DOCKER_SOCK=$STATE/docker.sock
SHIM_SOCK=$STATE/dockershim.sock
start_time=$SECONDS

# ---------------------------------------------------------------------------
# spec selection

# skip_regex: the default skips and those of skip.txt (one Go regexp a line,
# after the comment lines that give its reason), joined.
skip_regex() {
	local re=$DEFAULT_SKIP line
	while IFS= read -r line; do
		[[ -z $line || $line == \#* ]] && continue
		re+="|$line"
	done <"$SKIP_FILE"
	[[ -n $SKIP ]] && re+="|$SKIP"
	echo "$re"
}

# e2e_flags: upstream's e2e framework flags (test/e2e/framework/test_context.go).
e2e_flags() {
	local f=(
		--provider=local
		--node-os-distro=debian
		--node-os-arch=amd64
		--report-dir="$OUT/e2e-report"
		--e2e-output-dir="$OUT/e2e-output"
		--allowed-not-ready-nodes=0
		--e2e-verify-service-account=true
		--prepull-images=false
		--disable-log-dump=true
		--dump-logs-on-failure=true
		--dns-domain=cluster.local
	)
	# The one node's own (the nodes of a cluster are containers).
	if ((!CLUSTER)); then
		f+=(
			--kubelet-root-dir="$STATE/kubelet"
			--container-runtime-endpoint="unix://$SHIM_SOCK"
			--container-runtime-process-name=dockerd
			--container-runtime-pid-file="$STATE/docker.pid"
		)
	fi
	if [[ -n ${KUBECONFIG_PATH:-} ]]; then
		f+=(--kubeconfig="$KUBECONFIG_PATH" --kubectl-path="$CPBIN/kubectl")
	fi
	printf '%s\n' "${f[@]}"
}

select_specs() {
	local flags skip
	mapfile -t flags < <(e2e_flags)
	skip=$(skip_regex)
	kds_log "dry run: focus $DEFAULT_FOCUS, skip $skip"
	(cd "$OUT" && "$CBIN/ginkgo" run --dry-run --no-color --silence-skips --focus="$DEFAULT_FOCUS" \
		--skip="$skip" --json-report=dry-run.json --output-dir="$OUT" "$CBIN/e2e.test" -- "${flags[@]}") \
		>"$OUT/dry-run.log" 2>&1 || {
		tail -n 30 "$OUT/dry-run.log" >&2
		kds_die "ginkgo --dry-run failed (log: $OUT/dry-run.log)"
	}
	"$CBIN/specs" list -shard=1/1 "$OUT/dry-run.json" >"$OUT/all-specs.txt"
	"$CBIN/specs" list -shard="$SHARD" ${FOCUS:+-match="$FOCUS"} "$OUT/dry-run.json" >"$OUT/specs.txt"
	kds_log "$(wc -l <"$OUT/all-specs.txt") specs selected by focus and skips; $(wc -l <"$OUT/specs.txt") in shard $SHARD${FOCUS:+ matching $FOCUS} (list: $OUT/specs.txt)"
}

# ---------------------------------------------------------------------------
# processes: each in its own session, pid in $STATE/pids/NAME.pid

# start_bg NAME LOG CMD...: start CMD in the background.
start_bg() {
	local name=$1 log=$2 i
	shift 2
	kds_spawn "$STATE/pids/$name.pid" "$log" "$@"
	for ((i = 0; i < 100; i++)); do
		[[ -s $STATE/pids/$name.pid ]] && break
		sleep 0.05
	done
	kds_log "started $name (pid $(cat "$STATE/pids/$name.pid" 2>/dev/null), log $log)"
}

# bg_pid NAME: the pid of NAME if it still runs the program it was started as.
bg_pid() {
	local pidfile=$STATE/pids/$1.pid pid exe
	[[ -s $pidfile ]] || return 1
	pid=$(<"$pidfile")
	exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
	[[ $exe != */bash ]] || return 1
	echo "$pid"
}

# stop_bg NAME [TIMEOUT]: SIGTERM, then SIGKILL after TIMEOUT seconds (30).
stop_bg() {
	local name=$1 timeout=${2:-30} pid deadline
	pid=$(bg_pid "$name") || {
		rm -f "$STATE/pids/$1.pid"
		return 0
	}
	kds_log "stopping $name (pid $pid)"
	kill "$pid" 2>/dev/null || true
	deadline=$((SECONDS + timeout))
	while bg_pid "$name" >/dev/null && ((SECONDS < deadline)); do
		sleep 0.2
	done
	if pid=$(bg_pid "$name"); then
		kds_log "$name (pid $pid) still runs ${timeout}s after SIGTERM: SIGKILL"
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$STATE/pids/$name.pid"
}

require_running() {
	bg_pid "$1" >/dev/null && return 0
	tail -n 30 "$2" >&2 || true
	kds_die "$1 exited (log: $2)"
}

# wait_until WHAT TIMEOUT PROC LOG CMD...: retry CMD until it succeeds; PROC
# must keep running.
wait_until() {
	local what=$1 timeout=$2 proc=$3 log=$4 deadline
	shift 4
	deadline=$((SECONDS + timeout))
	until "$@" >/dev/null 2>&1; do
		require_running "$proc" "$log"
		((SECONDS < deadline)) || kds_die "timed out after ${timeout}s waiting for $what"
		sleep 0.5
	done
}

port_taken() {
	# shellcheck disable=SC2016 # expanded by the inner bash
	timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0"' "$1" 2>/dev/null
}

pdocker() { docker -H "unix://$DOCKER_SOCK" "$@"; }

# ---------------------------------------------------------------------------
# private dockerd

start_dockerd() {
	local d=$STATE/dockerd gw
	mkdir -p "$d"
	# A bridge of its own: with --bridge=none dockerd would delete the host
	# dockerd's docker0.
	if ! ip link show "$DOCKER_BRIDGE" >/dev/null 2>&1; then
		ip link add "$DOCKER_BRIDGE" type bridge
		ip addr add 10.199.250.1/24 dev "$DOCKER_BRIDGE"
		ip link set "$DOCKER_BRIDGE" up
	fi
	echo '{}' >"$d/daemon.json"
	start_bg dockerd "$STATE/logs/dockerd.log" dockerd --config-file="$d/daemon.json" \
		--data-root="$d/data" --exec-root="$d/x" --pidfile="$STATE/docker.pid" \
		-H "unix://$DOCKER_SOCK" --bridge="$DOCKER_BRIDGE" --iptables=false --ip-masq=false \
		--userland-proxy=false
	wait_until "the private dockerd" 60 dockerd "$STATE/logs/dockerd.log" pdocker info
	gw=$(bg_pid dockerd)
	kds_log "private dockerd answers on unix://$DOCKER_SOCK (pid $gw); loading ${#IMAGES[@]} images"
	docker save "${IMAGES[@]}" | pdocker load -q >/dev/null
}

stop_dockerd() {
	if bg_pid dockerd >/dev/null; then
		local ids
		ids=$(pdocker ps -aq 2>/dev/null || true)
		# shellcheck disable=SC2086 # IDs
		[[ -z $ids ]] || pdocker rm -f $ids >/dev/null 2>&1 || true
	fi
	stop_bg dockerd 30
	ip link del "$DOCKER_BRIDGE" 2>/dev/null || true
}

# ---------------------------------------------------------------------------
# registry.k8s.io, served locally for the PullAlways spec

HOSTS_LINE="127.0.0.1 registry.k8s.io # $TAG"
CERTS_FILE=/etc/docker/certs.d/registry.k8s.io/$TAG.crt

start_registry() {
	local r=$STATE/registry
	mkdir -p "$r/data"
	if port_taken 443; then
		kds_log "WARNING: 127.0.0.1:443 is taken by another process: registry.k8s.io is not served; the spec that pulls agnhost with PullAlways will fail"
		return 0
	fi
	command -v docker-registry >/dev/null || kds_die "docker-registry missing (scripts/prepare-host.sh installs it)"
	kds_tls_registry "$r" "$r" 127.0.0.1:443 "$TAG CA" registry.k8s.io
	grep -qxF "$HOSTS_LINE" /etc/hosts || echo "$HOSTS_LINE" >>/etc/hosts
	# The directories this run creates, removed at exit when empty.
	local d
	for d in /etc/docker/certs.d "$(dirname "$CERTS_FILE")"; do
		[[ -d $d ]] || echo "$d" >>"$STATE/created-dirs"
	done
	mkdir -p "$(dirname "$CERTS_FILE")"
	cp "$r/ca.crt" "$CERTS_FILE"
	start_bg registry "$STATE/logs/registry.log" docker-registry serve "$r/config.yml"
	wait_until "the registry" 30 registry "$STATE/logs/registry.log" \
		curl -sf --cacert "$r/ca.crt" --resolve registry.k8s.io:443:127.0.0.1 https://registry.k8s.io/v2/
	# dockerd's resolver re-reads /etc/hosts at most every 5 s (Go's hosts
	# cache): a dockerd started just before the line was added may not see it
	# yet, so a failed push is retried for up to 12 s.
	local img try
	for img in "${REGISTRY_IMAGES[@]}"; do
		for try in 1 2 3 4 5; do
			pdocker push -q "$img" >/dev/null 2>"$STATE/logs/push.err" && break
			((try < 5)) || kds_die "push of $img to the local registry.k8s.io failed: $(tail -1 "$STATE/logs/push.err")"
			sleep 3
		done
		kds_log "registry.k8s.io (local) serves $img"
	done
}

stop_registry() {
	stop_bg registry 10
	if grep -qxF "$HOSTS_LINE" /etc/hosts; then
		# In place (not sed -i): /etc/hosts may be a bind mount.
		local kept
		kept=$(grep -vxF "$HOSTS_LINE" /etc/hosts)
		printf '%s\n' "$kept" >/etc/hosts
	fi
	rm -f "$CERTS_FILE"
	if [[ -s $STATE/created-dirs ]]; then
		local d
		tac "$STATE/created-dirs" | while read -r d; do rmdir "$d" 2>/dev/null || true; done
		rm -f "$STATE/created-dirs"
	fi
}

# ---------------------------------------------------------------------------
# host guards

GUARD=(INPUT -p tcp --dport 5000 ! -i lo -m comment --comment "$TAG" -j DROP)

save_tunables() {
	local t
	: >"$STATE/tunables"
	for t in "${TUNABLES[@]}"; do
		if [[ -r /proc/sys/$t ]]; then
			echo "$t $(<"/proc/sys/$t")" >>"$STATE/tunables"
		fi
	done
}

restore_tunables() {
	local t v
	[[ -s $STATE/tunables ]] || return 0
	while read -r t v; do
		[[ $(<"/proc/sys/$t") == "$v" ]] || echo "$v" >"/proc/sys/$t" 2>/dev/null || true
	done <"$STATE/tunables"
	rm -f "$STATE/tunables"
}

# ---------------------------------------------------------------------------
# the node

# add_node_ip: NODE_IP on a port-less bridge of its own (this kernel has no
# dummy links), unless it is a loopback address.
add_node_ip() {
	[[ $NODE_IP == 127.* ]] && return 0
	local addrs
	addrs=$(ip -4 -o addr show | grep -v " $NODE_LINK " || true)
	if grep -qF " $NODE_IP/" <<<"$addrs"; then
		kds_die "$NODE_IP is an address of another interface: set KDS_CONFORMANCE_NODE_IP"
	fi
	ip link show "$NODE_LINK" >/dev/null 2>&1 || ip link add "$NODE_LINK" type bridge
	ip addr replace "$NODE_IP/32" dev "$NODE_LINK"
	ip link set "$NODE_LINK" up
}

# cgroup_mountpoints prints the mountpoints of the cgroup hierarchies, each
# with a trailing slash (not every directory in /sys/fs/cgroup is one: systemd
# in a node container may leave an empty "cpu,cpuacct" there).
cgroup_mountpoints() {
	kds_cgroup_mounts | awk '{ print $1 "/" }' | sort -u
}

make_cgroup_root() {
	local mp f
	for mp in $(cgroup_mountpoints); do
		mkdir -p "$mp$CGROUP_ROOT"
		for f in cpuset.cpus cpuset.mems; do
			if [[ -f $mp$f ]]; then
				cat "$mp$f" >"$mp$CGROUP_ROOT/$f"
			fi
		done
	done
}

remove_cgroup_root() {
	local mp
	for mp in $(cgroup_mountpoints); do
		[[ -d $mp$CGROUP_ROOT ]] || continue
		find "$mp$CGROUP_ROOT" -depth -type d -exec rmdir {} + 2>/dev/null || true
	done
}

write_node_config() {
	mkdir -p "$STATE/net.d" "$STATE/kubelet" "$STATE/pod-logs" "$STATE/shim" "$STATE/cni-cache" "$STATE/ipam"
	# The project's default pod network, with a bridge, network name and
	# host-local store of the harness's own.
	sed -e "s/\"name\": \"dockershim\"/\"name\": \"$CNI_NETWORK\"/" \
		-e "s/\"bridge\": \"dockershim0\"/\"bridge\": \"$CNI_BRIDGE\"/" \
		-e "s#\"type\": \"host-local\",#\"type\": \"host-local\", \"dataDir\": \"$STATE/ipam\",#" \
		-e "s#10.244.0.0/24#$SUBNET#" \
		"$KDS_ROOT/configs/cni/10-dockershim-bridge.conflist" >"$STATE/net.d/10-dockershim-bridge.conflist"
	if ! grep -q "\"$CNI_BRIDGE\"" "$STATE/net.d/10-dockershim-bridge.conflist" ||
		! grep -q "$STATE/ipam" "$STATE/net.d/10-dockershim-bridge.conflist"; then
		kds_die "configs/cni/10-dockershim-bridge.conflist changed shape: update write_node_config"
	fi
	echo "nameserver 127.0.0.1" >"$STATE/resolv.conf"
	# configs/kubelet-config.yaml for a cluster node, minus the static pods,
	# plus private paths and ports. Image GC and disk eviction are off in
	# effect: the host's disk is shared with other work.
	cat >"$STATE/kubelet-config.yaml" <<-EOF
		apiVersion: kubelet.config.k8s.io/v1beta1
		kind: KubeletConfiguration
		cgroupDriver: cgroupfs
		cgroupRoot: $CGROUP_ROOT
		containerRuntimeEndpoint: unix://$SHIM_SOCK
		runtimeRequestTimeout: 2m
		clusterDomain: cluster.local
		clusterDNS: [10.96.0.10]
		resolvConf: /etc/resolv.conf
		address: $NODE_IP
		port: $KUBELET_PORT
		readOnlyPort: 0
		healthzBindAddress: 127.0.0.1
		healthzPort: $HEALTHZ_PORT
		podLogsDir: $STATE/pod-logs
		containerLogMaxSize: 10Mi
		containerLogMaxFiles: 5
		maxPods: 110
		serializeImagePulls: true
		failSwapOn: false
		failCgroupV1: false
		imageGCHighThresholdPercent: 100
		imageGCLowThresholdPercent: 99
		evictionHard: {memory.available: 100Mi, nodefs.available: 2%, nodefs.inodesFree: 2%, imagefs.available: 2%, imagefs.inodesFree: 2%}
		authentication:
		  anonymous: {enabled: false}
		  webhook: {enabled: true}
		  x509: {clientCAFile: $STATE/cluster/pki/ca.crt}
		authorization: {mode: Webhook}
		logging:
		  format: text
	EOF
}

# common_kubelet_flags: the flags both kubelets get.
common_kubelet_flags() {
	printf '%s\n' --config="$STATE/kubelet-config.yaml" \
		--kubeconfig="$STATE/kubelet.conf" --bootstrap-kubeconfig="$STATE/cluster/bootstrap-kubelet.conf" \
		--root-dir="$STATE/kubelet" --cert-dir="$STATE/kubelet/pki" --node-ip="$NODE_IP" -v=2
}

start_node() {
	local flags
	mapfile -t flags < <(common_kubelet_flags)
	local shim_flags=(--docker-endpoint="unix://$DOCKER_SOCK" --experimental-dockershim-root-directory="$STATE/shim"
		--cni-conf-dir="$STATE/net.d" --cni-bin-dir=/usr/lib/cni --cni-cache-dir="$STATE/cni-cache"
		--pod-infra-container-image="$PAUSE_IMAGE")
	if [[ $KUBELET == this ]]; then
		start_bg kubelet "$STATE/logs/kubelet.log" "$KDS_ROOT/bin/kubelet" --container-runtime=docker \
			--container-runtime-endpoint="unix://$SHIM_SOCK" "${shim_flags[@]}" "${flags[@]}"
		NODE_PROC=kubelet
	else
		if [[ $KUBELET == upstream ]]; then
			start_bg dockershim "$STATE/logs/dockershim.log" "$KDS_ROOT/bin/kubelet" --experimental-dockershim \
				--container-runtime-endpoint="unix://$SHIM_SOCK" "${shim_flags[@]}"
			wait_until "the shim's socket" 30 dockershim "$STATE/logs/dockershim.log" test -S "$SHIM_SOCK"
		else
			# The same settings under cri-dockerd's names; its streaming
			# server on loopback only.
			start_bg cri-dockerd "$STATE/logs/cri-dockerd.log" "$CPBIN/cri-dockerd" \
				--container-runtime-endpoint="unix://$SHIM_SOCK" --docker-endpoint="unix://$DOCKER_SOCK" \
				--cri-dockerd-root-directory="$STATE/cri-dockerd" --network-plugin=cni \
				--cni-conf-dir="$STATE/net.d" --cni-bin-dir=/usr/lib/cni --cni-cache-dir="$STATE/cni-cache" \
				--pod-infra-container-image="$PAUSE_IMAGE" --streaming-bind-addr=127.0.0.1
			wait_until "cri-dockerd's socket" 30 cri-dockerd "$STATE/logs/cri-dockerd.log" test -S "$SHIM_SOCK"
		fi
		start_bg upstream-kubelet "$STATE/logs/upstream-kubelet.log" "$CPBIN/upstream-kubelet" \
			--container-runtime-endpoint="unix://$SHIM_SOCK" "${flags[@]}"
		NODE_PROC=upstream-kubelet
	fi
	wait_until "the node to register and be Ready" 180 "$NODE_PROC" "$STATE/logs/$NODE_PROC.log" node_ready
	NODE_NAME=$(kubectl get nodes -o jsonpath='{.items[0].metadata.name}')
	kds_log "node $NODE_NAME Ready ($KUBELET kubelet)"
}

node_ready() {
	[[ $(kubectl get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{end}' 2>/dev/null) == True ]]
}

kubectl() { "$CPBIN/kubectl" --kubeconfig "$KUBECONFIG_PATH" --request-timeout=20s "$@"; }

# drain_pods: delete the test namespaces so that the kubelet tears their pods
# down (CNI DEL included) before it stops; at most 3 minutes.
drain_pods() {
	[[ -n ${KUBECONFIG_PATH:-} ]] && bg_pid "${NODE_PROC:-none}" >/dev/null || return 0
	local ns deadline=$((SECONDS + 180))
	ns=$(kubectl get ns -o name 2>/dev/null | grep -v -E '^namespace/(default|kube-system|kube-public|kube-node-lease)$' || true)
	if [[ -n $ns ]]; then
		kds_log "deleting $(wc -l <<<"$ns") leftover test namespaces"
		# shellcheck disable=SC2086 # names
		kubectl delete --wait=false $ns >/dev/null 2>&1 || true
	fi
	while ((SECONDS < deadline)); do
		[[ -z $(kubectl get pods -A --field-selector "spec.nodeName=${NODE_NAME:-}" -o name 2>/dev/null) ]] && break
		sleep 2
	done
	# Their sandboxes, stopped by the kubelet.
	while ((SECONDS < deadline)) && [[ -n $(pdocker ps -q --filter label=io.kubernetes.docker.type=podsandbox 2>/dev/null) ]]; do
		sleep 2
	done
}

# sweep_cni_rules: iptables rules the CNI plugins made for this network's pods
# and did not remove (pods whose sandbox was not torn down); their comments
# name the network.
sweep_cni_rules() {
	local table save script
	for table in nat filter; do
		save=$(iptables-save -t "$table" 2>/dev/null) || continue
		script=$(awk -v net="name: \\\\\"$CNI_NETWORK\\\\\"" '
			index($0, net) && /^-A / {
				rule = substr($0, 4); print "-D " rule
				n = split($0, f, " ")
				for (i = 1; i < n; i++) if (f[i] == "-j" && f[i+1] ~ /^CNI-/) chains[f[i+1]] = 1
			}
			END { for (c in chains) { print "-F " c; print "-X " c } }' <<<"$save")
		[[ -n $script ]] || continue
		kds_log "removing leftover $table rules of CNI network $CNI_NETWORK"
		printf '*%s\n%s\nCOMMIT\n' "$table" "$script" | iptables-restore --noflush 2>/dev/null || true
	done
}

# ---------------------------------------------------------------------------
# teardown

# unmount_state: the mounts under $STATE the kubelet left (volume tmpfs, ...),
# deepest first.
unmount_state() {
	local m
	{ grep -o " $STATE/[^ ]*" /proc/self/mounts || true; } | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done
}

collect_logs() {
	mkdir -p "$OUT/logs"
	cp -f "$STATE"/logs/*.log "$OUT/logs/" 2>/dev/null || true
	if [[ -d $STATE/cluster/logs ]]; then
		local f
		for f in "$STATE"/cluster/logs/*.log; do
			if [[ -f $f ]]; then
				cp -f "$f" "$OUT/logs/controlplane-$(basename "$f")"
			fi
		done
	fi
}

# cluster: scripts/cluster.sh for the cluster of --cluster.
cluster() {
	KDS_CLUSTER_NAME=conformance KDS_CLUSTER_STATE=$STATE/kds-cluster KDS_CLUSTER_PORT_BASE=$PORT_BASE \
		KDS_CLUSTER_POD_CIDR=10.223.0.0/16 "$KDS_SCRIPTS/cluster.sh" "$@"
}

# cluster_teardown: each node's journal (kubelet, kube-proxy, kds-podnet,
# docker) and the control plane's logs into OUT/logs, then the cluster down.
cluster_teardown() {
	local rc=$? node f
	trap - EXIT INT TERM ERR
	set +e
	kds_log "tearing down the cluster"
	mkdir -p "$OUT/logs"
	for node in $(docker ps --filter label=io.kubelet-dockershim.cluster=conformance --format '{{.Names}}'); do
		docker exec "$node" journalctl --no-pager -u kubelet -u kube-proxy -u kds-podnet -u docker >"$OUT/logs/$node.log" 2>&1
	done
	for f in "$STATE"/kds-cluster/cp/logs/*.log; do
		[[ -f $f ]] && cp -f "$f" "$OUT/logs/controlplane-$(basename "$f")"
	done
	cluster down >/dev/null 2>&1
	kds_log "done in $((SECONDS - start_time))s; results in $OUT"
	exit "$rc"
}

teardown() {
	local rc=$?
	trap - EXIT INT TERM ERR
	set +e
	kds_log "tearing down"
	drain_pods
	stop_bg upstream-kubelet 30
	stop_bg kubelet 30
	stop_bg dockershim 30
	stop_bg cri-dockerd 30
	stop_dockerd
	sweep_cni_rules
	ip link del "$CNI_BRIDGE" 2>/dev/null
	ip link del "$NODE_LINK" 2>/dev/null
	unmount_state
	remove_cgroup_root
	stop_registry
	while iptables -w -C "${GUARD[@]}" 2>/dev/null; do iptables -w -D "${GUARD[@]}"; done
	restore_tunables
	if [[ -d $STATE/cluster ]]; then
		"$KDS_SCRIPTS/controlplane.sh" down "$STATE/cluster" >/dev/null 2>&1
	fi
	collect_logs
	kds_log "done in $((SECONDS - start_time))s; results in $OUT"
	exit "$rc"
}

# run_specs: ginkgo over the selected specs (all of them when unsharded and
# unfocused), then the summary; returns ginkgo's status.
run_specs() {
	local flags select_flags focus ginkgo_rc
	mapfile -t flags < <(e2e_flags)
	if [[ $SHARD == 1/1 && -z $FOCUS ]]; then
		select_flags=(--focus="$DEFAULT_FOCUS" --skip="$(skip_regex)")
	else
		focus=$("$CBIN/specs" regex "$OUT/dry-run.json" <"$OUT/specs.txt")
		((${#focus} < 120000)) || kds_die "the focus regexp of $(wc -l <"$OUT/specs.txt") specs is too long for one argument: use more shards"
		select_flags=(--focus="$focus")
	fi
	kds_log "running $(wc -l <"$OUT/specs.txt") specs with $PROCS processes (log: $OUT/ginkgo.log)"
	set +e
	(cd "$OUT" && "$CBIN/ginkgo" run --procs="$PROCS" --no-color --silence-skips --timeout="$TIMEOUT" \
		--poll-progress-after=10m --poll-progress-interval=5m \
		"${select_flags[@]}" --junit-report=junit.xml --json-report=report.json --output-dir="$OUT" \
		"$CBIN/e2e.test" -- "${flags[@]}") 2>&1 | tee "$OUT/ginkgo.log" |
		grep -E --line-buffered '\[(FAIL|PANICKED|TIMEDOUT|INTERRUPTED)\]|^Ran [0-9]|(SUCCESS|FAIL)!' >&2
	ginkgo_rc=${PIPESTATUS[0]}
	set -e
	if [[ -s $OUT/report.json ]]; then
		"$CBIN/specs" summary "$OUT/report.json" >"$OUT/summary.txt"
		cat "$OUT/summary.txt"
	else
		echo "no report: ginkgo exited $ginkgo_rc before writing one (see $OUT/ginkgo.log)" | tee "$OUT/summary.txt"
	fi
	return "$ginkgo_rc"
}

# ---------------------------------------------------------------------------
# main

"$KDS_SCRIPTS/prepare-host.sh"
kds_ensure_go
export GOFLAGS=${GOFLAGS:--buildvcs=false}
CBIN=$("$KDS_SCRIPTS/build-conformance.sh")
[[ -r $SKIP_FILE ]] || kds_die "$SKIP_FILE missing"
select_specs
if ((DRY_RUN)); then
	echo "$(wc -l <"$OUT/specs.txt") specs selected (shard $SHARD${FOCUS:+, matching $FOCUS}): $OUT/specs.txt"
	exit 0
fi
[[ -s $OUT/specs.txt ]] || kds_die "no spec selected"
# One run at a time per state dir: the lock is held until this script exits.
mkdir -p "$(dirname "$STATE")"
exec {lock_fd}>"$STATE.lock"
flock -n "$lock_fd" || kds_die "another conformance run holds $STATE.lock"

kds_build_kubelet
CPBIN=$("$KDS_SCRIPTS/build-controlplane.sh")
[[ $KUBELET == this || -x $CPBIN/upstream-kubelet ]] || kds_die "no upstream-kubelet in $CPBIN"
[[ $KUBELET != cri-dockerd || -x $CPBIN/cri-dockerd ]] || kds_die "no cri-dockerd in $CPBIN"
mapfile -t CONFORMANCE_IMAGES < <("$KDS_SCRIPTS/conformance-images.sh")

if ((CLUSTER)); then
	# A previous run's cluster, then the state dir.
	cluster down >/dev/null 2>&1 || true
	rm -rf "$STATE"
	mkdir -p "$STATE"
	set -E
	trap 'kds_log "ERROR: line $LINENO: $BASH_COMMAND exited $?"' ERR
	trap cluster_teardown EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	image_args=()
	for img in "${CONFORMANCE_IMAGES[@]}"; do image_args+=(--image "$img"); done
	for img in "${REGISTRY_IMAGES[@]}"; do image_args+=(--registry-image "$img"); done
	cluster up --nodes 3 "${image_args[@]}"
	KUBECONFIG_PATH=$STATE/kds-cluster/cp/admin.conf
	rc=0
	run_specs || rc=$?
	exit "$rc"
fi

# A previous run's leftovers in the state dir (its processes, then the dir).
if [[ -d $STATE ]]; then
	for name in upstream-kubelet kubelet dockershim cri-dockerd registry; do stop_bg "$name" 30; done
	stop_dockerd
	if [[ -d $STATE/cluster ]]; then
		"$KDS_SCRIPTS/controlplane.sh" down "$STATE/cluster" >/dev/null 2>&1 || true
	fi
	restore_tunables
	unmount_state
	rm -rf "$STATE"
fi
mkdir -p "$STATE/pids" "$STATE/logs"
set -E
trap 'kds_log "ERROR: line $LINENO: $BASH_COMMAND exited $?"' ERR
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for p in "$KUBELET_PORT" "$HEALTHZ_PORT" "$KDS_APISERVER_PORT" "$KDS_ETCD_PORT" "$KDS_ETCD_PEER_PORT" "$KDS_CM_PORT" "$KDS_SCHEDULER_PORT"; do
	port_taken "$p" && kds_die "127.0.0.1:$p is taken by another process (set KDS_CONFORMANCE_PORT_BASE)"
done
port_taken 5000 && kds_log "WARNING: 127.0.0.1:5000 is taken: the [Serial] private-registry specs will fail"
routes=$(ip -4 route show)
if grep -q "^$SUBNET " <<<"$routes"; then
	kds_die "a route for $SUBNET exists already (another pod network?): set KDS_CONFORMANCE_SUBNET"
fi

save_tunables
iptables -w -C "${GUARD[@]}" 2>/dev/null || iptables -w -I "${GUARD[@]}"
start_dockerd
start_registry
write_node_config
add_node_ip
make_cgroup_root
"$KDS_SCRIPTS/controlplane.sh" up "$STATE/cluster"
KUBECONFIG_PATH=$STATE/cluster/admin.conf
start_node

rc=0
run_specs || rc=$?
exit "$rc"
