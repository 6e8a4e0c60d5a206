#!/usr/bin/env bash
# controlplane.sh: a throwaway Kubernetes control plane on loopback for the
# end-to-end tests of the kubelet.
#
#   controlplane.sh up STATE_DIR    build (or reuse) the binaries with
#                                   build-controlplane.sh, make a PKI with
#                                   openssl and start etcd, kube-apiserver,
#                                   kube-controller-manager and kube-scheduler,
#                                   all on 127.0.0.1 only. Waits (at most 120 s)
#                                   until /readyz is ok and the default
#                                   ServiceAccount exists, then creates a
#                                   bootstrap token with kubeadm's RBAC.
#   controlplane.sh env STATE_DIR   print NAME=VALUE lines (KUBECONFIG,
#                                   KDS_BOOTSTRAP_KUBECONFIG, KDS_APISERVER,
#                                   KDS_KUBECTL, KDS_CA); e.g.
#                                   set -a; eval "$(controlplane.sh env D)"; set +a
#   controlplane.sh down STATE_DIR  SIGTERM the processes whose pids are in
#                                   STATE_DIR/pids, SIGKILL after 20 s. Removes
#                                   nothing: the caller removes STATE_DIR.
#
# STATE_DIR holds pki/, etcd/ (data), logs/, pids/, admin.conf,
# bootstrap-kubelet.conf, controller-manager.conf, scheduler.conf and
# bootstrap-token. etcd speaks plain HTTP (loopback only); the apiserver HTTPS.
#
# Env (ports on 127.0.0.1):
#   KDS_APISERVER_PORT   kube-apiserver secure port        (default 6443)
#   KDS_ETCD_PORT        etcd client port                  (default 2379)
#   KDS_ETCD_PEER_PORT   etcd peer port                    (default 2380)
#   KDS_CM_PORT          kube-controller-manager https port (default 10257)
#   KDS_SCHEDULER_PORT   kube-scheduler https port         (default 10259)
# and, for a cluster of node containers (scripts/cluster.sh):
#   KDS_APISERVER_ADVERTISE  the address the API server advertises as the
#                        endpoint of the kubernetes Service (lease
#                        reconciler); it still listens on 127.0.0.1 only, so
#                        the address must be one the nodes relay to it
#                        (default: none, and no endpoint is published)
#   KDS_CLUSTER_CIDR     the pod network: the controller-manager allocates
#                        each Node a /24 of it (spec.podCIDR), and the API
#                        server connects to the pods of webhooks and
#                        aggregated APIs directly (--enable-aggregator-routing)
#                        (default: none)
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

APISERVER_PORT=${KDS_APISERVER_PORT:-6443}
ETCD_PORT=${KDS_ETCD_PORT:-2379}
ETCD_PEER_PORT=${KDS_ETCD_PEER_PORT:-2380}
CM_PORT=${KDS_CM_PORT:-10257}
SCHEDULER_PORT=${KDS_SCHEDULER_PORT:-10259}
SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1
APISERVER_URL=https://127.0.0.1:$APISERVER_PORT
ADVERTISE=${KDS_APISERVER_ADVERTISE:-}
CLUSTER_CIDR=${KDS_CLUSTER_CIDR:-}
READY_TIMEOUT=120
STOP_TIMEOUT=20
# Components in start order; `down` stops them in reverse.
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler)
STARTED=()
# Components this run of `up` launched itself (not found running): the only
# ones a failed `up` stops.
LAUNCHED=()

usage() {
	echo "usage: $0 up|down|env STATE_DIR" >&2
	exit 2
}

# ---------------------------------------------------------------------------
# PKI

# write_openssl_conf: the extension profiles every certificate is signed with.
write_openssl_conf() {
	cat >"$PKI/openssl.cnf" <<-EOF
		[req]
		distinguished_name = dn
		[dn]
		[ca]
		basicConstraints = critical, CA:TRUE
		keyUsage = critical, digitalSignature, keyEncipherment, keyCertSign, cRLSign
		subjectKeyIdentifier = hash
		[client]
		basicConstraints = critical, CA:FALSE
		keyUsage = critical, digitalSignature, keyEncipherment
		extendedKeyUsage = clientAuth
		authorityKeyIdentifier = keyid
		[apiserver]
		basicConstraints = critical, CA:FALSE
		keyUsage = critical, digitalSignature, keyEncipherment
		extendedKeyUsage = serverAuth
		authorityKeyIdentifier = keyid
		subjectAltName = @apiserver_names
		[apiserver_names]
		DNS.1 = localhost
		DNS.2 = kubernetes
		DNS.3 = kubernetes.default
		DNS.4 = kubernetes.default.svc
		DNS.5 = kubernetes.default.svc.cluster.local
		IP.1 = 127.0.0.1
		IP.2 = $SERVICE_IP
	EOF
	if [[ -n $ADVERTISE ]]; then
		echo "IP.3 = $ADVERTISE" >>"$PKI/openssl.cnf"
	fi
}

# new_ec_key FILE: a P-256 private key (PKCS#8 PEM).
new_ec_key() {
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
}

# new_rsa_key FILE: a 2048-bit RSA private key (PKCS#8 PEM).
new_rsa_key() {
	openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1" 2>/dev/null
}

# new_ca NAME CN: PKI/NAME.{key,crt}, a self-signed CA, unless it exists.
new_ca() {
	[[ -s $PKI/$1.crt && -s $PKI/$1.key ]] && return 0
	new_rsa_key "$PKI/$1.key"
	openssl req -x509 -new -config "$PKI/openssl.cnf" -extensions ca \
		-key "$PKI/$1.key" -subj "/CN=$2" -days 3650 -out "$PKI/$1.crt"
}

# issue NAME SUBJECT PROFILE [CA]: PKI/NAME.{key,crt} signed by PKI/CA (default
# ca), unless they exist already.
issue() {
	local name=$1 subject=$2 profile=$3 ca=${4:-ca}
	[[ -s $PKI/$name.crt && -s $PKI/$name.key ]] && return 0
	new_ec_key "$PKI/$name.key"
	openssl req -new -config "$PKI/openssl.cnf" -key "$PKI/$name.key" \
		-subj "$subject" -out "$PKI/$name.csr"
	openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/$ca.crt" -CAkey "$PKI/$ca.key" \
		-CAcreateserial -days 365 -extfile "$PKI/openssl.cnf" -extensions "$profile" \
		-out "$PKI/$name.crt" 2>/dev/null
	rm -f "$PKI/$name.csr"
}

make_pki() {
	mkdir -p "$PKI"
	chmod 700 "$PKI"
	write_openssl_conf
	new_ca ca kubernetes
	# The aggregation layer's, as kubeadm makes them: the API server proxies
	# to aggregated API servers with front-proxy-client, which they trust
	# through the front-proxy CA (kube-system/extension-apiserver-authentication).
	new_ca front-proxy-ca front-proxy-ca
	issue front-proxy-client "/CN=front-proxy-client" client front-proxy-ca
	issue apiserver "/CN=kube-apiserver" apiserver
	issue apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" client
	issue admin "/O=system:masters/CN=kubernetes-admin" client
	issue controller-manager "/CN=system:kube-controller-manager" client
	issue scheduler "/CN=system:kube-scheduler" client
	# kube-proxy's identity: the user upstream's system:node-proxier binding names.
	issue kube-proxy "/CN=system:kube-proxy" client
	if [[ ! -s $PKI/sa.key ]]; then
		new_rsa_key "$PKI/sa.key"
		openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	fi
}

# ---------------------------------------------------------------------------
# kubeconfigs

b64() { base64 -w0 <"$1"; }

# write_kubeconfig FILE USER CREDENTIAL_LINES: a kubeconfig for APISERVER_URL
# with the CA embedded; CREDENTIAL_LINES are the user's fields, indented.
write_kubeconfig() {
	local file=$1 user=$2 creds=$3
	cat >"$file.tmp" <<-EOF
		apiVersion: v1
		kind: Config
		clusters:
		- name: kubernetes
		  cluster:
		    server: $APISERVER_URL
		    certificate-authority-data: $(b64 "$PKI/ca.crt")
		users:
		- name: $user
		  user:
		$creds
		contexts:
		- name: $user@kubernetes
		  context:
		    cluster: kubernetes
		    user: $user
		current-context: $user@kubernetes
		preferences: {}
	EOF
	chmod 600 "$file.tmp"
	mv "$file.tmp" "$file"
}

# cert_kubeconfig FILE USER PKI_NAME: a kubeconfig with a client certificate.
cert_kubeconfig() {
	local creds
	creds=$(printf '    client-certificate-data: %s\n    client-key-data: %s' \
		"$(b64 "$PKI/$3.crt")" "$(b64 "$PKI/$3.key")")
	write_kubeconfig "$1" "$2" "$creds"
}

# make_bootstrap_token: STATE/bootstrap-token holds "ID.SECRET" (kept across
# runs of up).
make_bootstrap_token() {
	if [[ ! -s $STATE/bootstrap-token ]]; then
		# Hex is a subset of the [a-z0-9] alphabet bootstrap tokens use. It
		# can be all digits: the YAML below quotes it.
		printf '%s.%s\n' "$(openssl rand -hex 3)" "$(openssl rand -hex 8)" >"$STATE/bootstrap-token"
		chmod 600 "$STATE/bootstrap-token"
	fi
	TOKEN=$(<"$STATE/bootstrap-token")
	TOKEN_ID=${TOKEN%%.*}
	TOKEN_SECRET=${TOKEN#*.}
}

make_kubeconfigs() {
	cert_kubeconfig "$STATE/admin.conf" kubernetes-admin admin
	cert_kubeconfig "$STATE/controller-manager.conf" system:kube-controller-manager controller-manager
	cert_kubeconfig "$STATE/scheduler.conf" system:kube-scheduler scheduler
	cert_kubeconfig "$STATE/kube-proxy.conf" system:kube-proxy kube-proxy
	write_kubeconfig "$STATE/bootstrap-kubelet.conf" tls-bootstrap-token-user "    token: $TOKEN"
}

# ---------------------------------------------------------------------------
# processes

# component_pid NAME: the pid in STATE/pids/NAME.pid if that process is alive
# and still runs BIN/NAME (not a reused pid).
component_pid() {
	local f=$STATE/pids/$1.pid pid exe
	[[ -s $f ]] || return 1
	pid=$(<"$f")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	# A zombie has no exe link: it counts as gone.
	exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
	[[ $(basename "$exe") == "$1" ]] || return 1
	echo "$pid"
}

# port_taken PORT: whether something listens on 127.0.0.1:PORT.
port_taken() {
	# shellcheck disable=SC2016 # expanded by the inner bash
	timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0"' "$1" 2>/dev/null
}

# launch NAME PORT ARGS...: start BIN/NAME ARGS in its own session, without
# any ETCD_* variable in its environment, logging to STATE/logs/NAME.log,
# unless ours already runs.
launch() {
	local name=$1 port=$2
	shift 2
	if component_pid "$name" >/dev/null; then
		kds_log "$name already running (pid $(component_pid "$name"))"
		STARTED+=("$name")
		return
	fi
	port_taken "$port" && kds_die "127.0.0.1:$port (for $name) is already taken by another process"
	local pidfile=$STATE/pids/$name.pid unset_args=() v i
	for v in $(compgen -e); do
		[[ $v == ETCD_* ]] && unset_args+=(-u "$v")
	done
	rm -f "$pidfile"
	kds_spawn "$pidfile" "$STATE/logs/$name.log" env "${unset_args[@]}" "$BIN/$name" "$@"
	# Until the pid runs the binary itself (not bash or env on the way).
	for ((i = 0; i < 100; i++)); do
		component_pid "$name" >/dev/null && break
		sleep 0.05
	done
	LAUNCHED+=("$name")
	component_pid "$name" >/dev/null || require_alive "$name"
	STARTED+=("$name")
	kds_log "started $name (pid $(<"$pidfile"), log $STATE/logs/$name.log)"
}

# require_alive NAME: die with the tail of its log when NAME has exited.
require_alive() {
	component_pid "$1" >/dev/null && return 0
	tail -n 20 "$STATE/logs/$1.log" >&2 || true
	kds_die "$1 exited (log: $STATE/logs/$1.log)"
}

kubectl_admin() {
	"$BIN/kubectl" --kubeconfig "$STATE/admin.conf" --request-timeout=10s "$@"
}

# wait_for WHAT CMD...: retry CMD until it succeeds or DEADLINE passes; every
# component started so far (STARTED) must stay alive meanwhile.
wait_for() {
	local what=$1 name
	shift
	until "$@" >/dev/null 2>&1; do
		for name in "${STARTED[@]}"; do
			require_alive "$name"
		done
		((SECONDS < DEADLINE)) || kds_die "timed out after ${READY_TIMEOUT}s waiting for $what"
		sleep 0.5
	done
}

etcd_healthy() {
	# shellcheck disable=SC2016 # expanded by the inner bash
	timeout 2 bash -c '
		exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1
		printf "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" >&3
		grep -q "\"health\":\"true\"" <&3' "$ETCD_PORT"
}

apiserver_ready() { [[ $(kubectl_admin get --raw /readyz 2>/dev/null) == ok ]]; }

start_etcd() {
	mkdir -p "$STATE/etcd"
	chmod 700 "$STATE/etcd"
	local client=http://127.0.0.1:$ETCD_PORT peer=http://127.0.0.1:$ETCD_PEER_PORT
	port_taken "$ETCD_PEER_PORT" && ! component_pid etcd >/dev/null &&
		kds_die "127.0.0.1:$ETCD_PEER_PORT (etcd peer) is already taken by another process"
	# --unsafe-no-fsync: a throwaway test store; fsync only slows the tests.
	launch etcd "$ETCD_PORT" \
		--name=default --data-dir="$STATE/etcd" \
		--listen-client-urls="$client" --advertise-client-urls="$client" \
		--listen-peer-urls="$peer" --initial-advertise-peer-urls="$peer" \
		--initial-cluster="default=$peer" --initial-cluster-state=new \
		--unsafe-no-fsync --log-level=warn
}

start_apiserver() {
	# Without an advertised address of the nodes' the kubernetes Service has
	# no endpoint: 127.0.0.1 is no address a pod can reach.
	local endpoint=(--advertise-address=127.0.0.1 --endpoint-reconciler-type=none)
	if [[ -n $ADVERTISE ]]; then
		endpoint=(--advertise-address="$ADVERTISE" --endpoint-reconciler-type=lease)
	fi
	# A cluster's API server reaches webhooks and aggregated APIs at their
	# pods' addresses (the host routes the pod network to the nodes); a
	# Service's cluster IP works only where kube-proxy runs, in the nodes.
	if [[ -n $CLUSTER_CIDR ]]; then
		endpoint+=(--enable-aggregator-routing=true)
	fi
	launch kube-apiserver "$APISERVER_PORT" \
		--bind-address=127.0.0.1 "${endpoint[@]}" \
		--secure-port="$APISERVER_PORT" \
		--etcd-servers="http://127.0.0.1:$ETCD_PORT" \
		--service-cluster-ip-range="$SERVICE_CIDR" \
		--authorization-mode=Node,RBAC \
		--enable-admission-plugins=NodeRestriction \
		--client-ca-file="$PKI/ca.crt" \
		--tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
		--kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
		--kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
		--kubelet-preferred-address-types=InternalIP,Hostname \
		--service-account-key-file="$PKI/sa.pub" \
		--service-account-signing-key-file="$PKI/sa.key" \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--enable-bootstrap-token-auth \
		--requestheader-client-ca-file="$PKI/front-proxy-ca.crt" \
		--requestheader-allowed-names=front-proxy-client \
		--requestheader-username-headers=X-Remote-User \
		--requestheader-group-headers=X-Remote-Group \
		--requestheader-extra-headers-prefix=X-Remote-Extra- \
		--proxy-client-cert-file="$PKI/front-proxy-client.crt" \
		--proxy-client-key-file="$PKI/front-proxy-client.key" \
		--allow-privileged=true \
		--cert-dir="$PKI"
}

start_controller_manager() {
	local kc=$STATE/controller-manager.conf cidrs=()
	if [[ -n $CLUSTER_CIDR ]]; then
		cidrs=(--allocate-node-cidrs --cluster-cidr="$CLUSTER_CIDR" --node-cidr-mask-size=24)
	fi
	launch kube-controller-manager "$CM_PORT" \
		--kubeconfig="$kc" --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
		--bind-address=127.0.0.1 --secure-port="$CM_PORT" --cert-dir="$PKI/controller-manager-serving" \
		--cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
		--root-ca-file="$PKI/ca.crt" \
		--requestheader-client-ca-file="$PKI/front-proxy-ca.crt" \
		--service-account-private-key-file="$PKI/sa.key" \
		--use-service-account-credentials \
		--controllers='*,bootstrapsigner,tokencleaner' \
		"${cidrs[@]}" \
		--leader-elect=false
}

start_scheduler() {
	local kc=$STATE/scheduler.conf
	launch kube-scheduler "$SCHEDULER_PORT" \
		--kubeconfig="$kc" --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
		--bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" --cert-dir="$PKI/scheduler-serving" \
		--leader-elect=false
}

# apply_bootstrap_objects: the bootstrap token Secret and kubeadm's RBAC for
# kubelet TLS bootstrapping and client certificate rotation.
apply_bootstrap_objects() {
	local group=system:bootstrappers:kubeadm:default-node-token
	kubectl_admin apply -f - >/dev/null <<-EOF
		apiVersion: v1
		kind: Secret
		metadata:
		  name: "bootstrap-token-$TOKEN_ID"
		  namespace: kube-system
		type: bootstrap.kubernetes.io/token
		stringData:
		  description: kubelet-dockershim end-to-end tests
		  token-id: "$TOKEN_ID"
		  token-secret: "$TOKEN_SECRET"
		  usage-bootstrap-authentication: "true"
		  usage-bootstrap-signing: "true"
		  auth-extra-groups: $group
		---
		apiVersion: rbac.authorization.k8s.io/v1
		kind: ClusterRoleBinding
		metadata:
		  name: kubeadm:kubelet-bootstrap
		roleRef:
		  apiGroup: rbac.authorization.k8s.io
		  kind: ClusterRole
		  name: system:node-bootstrapper
		subjects:
		- apiGroup: rbac.authorization.k8s.io
		  kind: Group
		  name: $group
		---
		apiVersion: rbac.authorization.k8s.io/v1
		kind: ClusterRoleBinding
		metadata:
		  name: kubeadm:node-autoapprove-bootstrap
		roleRef:
		  apiGroup: rbac.authorization.k8s.io
		  kind: ClusterRole
		  name: system:certificates.k8s.io:certificatesigningrequests:nodeclient
		subjects:
		- apiGroup: rbac.authorization.k8s.io
		  kind: Group
		  name: $group
		---
		apiVersion: rbac.authorization.k8s.io/v1
		kind: ClusterRoleBinding
		metadata:
		  name: kubeadm:node-autoapprove-certificate-rotation
		roleRef:
		  apiGroup: rbac.authorization.k8s.io
		  kind: ClusterRole
		  name: system:certificates.k8s.io:certificatesigningrequests:selfnodeclient
		subjects:
		- apiGroup: rbac.authorization.k8s.io
		  kind: Group
		  name: system:nodes
	EOF
}

# on_up_exit: when up fails, stop what this run launched so that nothing
# leaks; components that were already running (a re-run of up after one of
# them stopped) are left alone.
on_up_exit() {
	local rc=$?
	if ((rc != 0 && ${#LAUNCHED[@]} > 0)); then
		kds_log "up failed; stopping the components it launched (state kept in $STATE)"
		stop_all "${LAUNCHED[@]}"
	fi
}

up() {
	local start=$SECONDS
	BIN=$("$KDS_SCRIPTS/build-controlplane.sh")
	[[ -x $BIN/kube-apiserver ]] || kds_die "no kube-apiserver in $BIN"
	command -v openssl >/dev/null || kds_die "openssl missing (apt-get install openssl)"
	mkdir -p "$STATE/logs" "$STATE/pids"
	echo "$BIN" >"$STATE/bin-dir"
	echo "$APISERVER_URL" >"$STATE/apiserver-url"
	trap on_up_exit EXIT

	make_pki
	make_bootstrap_token
	make_kubeconfigs

	DEADLINE=$((SECONDS + READY_TIMEOUT))
	start_etcd
	wait_for "etcd /health" etcd_healthy
	start_apiserver
	wait_for "kube-apiserver /readyz" apiserver_ready
	# Only now: with --authentication-kubeconfig they exit when the RBAC
	# bootstrap roles are not there yet.
	start_controller_manager
	start_scheduler
	apply_bootstrap_objects
	wait_for "the default ServiceAccount" kubectl_admin -n default get serviceaccount default
	trap - EXIT
	kds_log "control plane up on $APISERVER_URL in $((SECONDS - start))s"
}

# stop_all [NAME...]: SIGTERM the named components (default: all) one by one
# in reverse start order (etcd last: an apiserver without etcd can hang in
# shutdown), each waited for; SIGKILL what is left once STOP_TIMEOUT has passed.
stop_all() {
	local only=" ${*:-${COMPONENTS[*]}} " name pid i deadline=$((SECONDS + STOP_TIMEOUT))
	for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
		name=${COMPONENTS[i]}
		[[ $only == *" $name "* ]] || continue
		pid=$(component_pid "$name") || continue
		kds_log "stopping $name (pid $pid)"
		kill "$pid" 2>/dev/null || true
		# component_pid, not kill -0: a zombie child of `up` counts as gone.
		while component_pid "$name" >/dev/null && ((SECONDS < deadline)); do
			sleep 0.1
		done
	done
	for name in "${COMPONENTS[@]}"; do
		[[ $only == *" $name "* ]] || continue
		if pid=$(component_pid "$name"); then
			kds_log "$name (pid $pid) still runs ${STOP_TIMEOUT}s after SIGTERM: SIGKILL"
			kill -9 "$pid" 2>/dev/null || true
		fi
		rm -f "$STATE/pids/$name.pid"
	done
}

down() {
	[[ -d $STATE/pids ]] || return 0
	stop_all
}

print_env() {
	[[ -s $STATE/bin-dir && -s $STATE/apiserver-url ]] || kds_die "$STATE has no control plane (run: $0 up $STATE)"
	printf 'KUBECONFIG=%q\n' "$STATE/admin.conf"
	printf 'KDS_BOOTSTRAP_KUBECONFIG=%q\n' "$STATE/bootstrap-kubelet.conf"
	printf 'KDS_APISERVER=%q\n' "$(<"$STATE/apiserver-url")"
	printf 'KDS_KUBECTL=%q\n' "$(<"$STATE/bin-dir")/kubectl"
	printf 'KDS_CA=%q\n' "$STATE/pki/ca.crt"
}

(($# == 2)) || usage
case $1 in
up)
	mkdir -p "$2"
	STATE=$(cd "$2" && pwd)
	PKI=$STATE/pki
	up
	;;
down)
	[[ -d $2 ]] || exit 0
	STATE=$(cd "$2" && pwd)
	down
	;;
env)
	[[ -d $2 ]] || kds_die "no state dir $2"
	STATE=$(cd "$2" && pwd)
	print_env
	;;
*) usage ;;
esac
