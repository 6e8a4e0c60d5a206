#!/usr/bin/env bash
# cluster.sh: a local multi-node cluster of this kubelet on one machine, the
# way kind makes one, but with Docker nodes: the control plane on the host's
# loopback (scripts/controlplane.sh) and N node containers, each with systemd
# as PID 1, its own dockerd, this kubelet in docker mode (its built-in
# dockershim), kube-proxy and its own IP on a private Docker network. Run as
# root.
#
#   cluster.sh up [--nodes N] [--image IMAGE]... [--registry-image IMAGE]...
#                     (N default 3) build what is missing, start the control
#                     plane, the nodes and CoreDNS; returns when every node is
#                     Ready and CoreDNS answers.
#                     --image: a host image to copy into every node besides
#                     pause and CoreDNS (no outside registry is reachable)
#                     --registry-image: a host image the nodes can also pull,
#                     from the cluster's registry, which answers for the
#                     image's registry host (e.g. registry.k8s.io; for the
#                     pods that pull with imagePullPolicy Always)
#   cluster.sh add-node [--image IMAGE]...   one more node (a new name: the
#                     index never repeats); prints its name
#   cluster.sh remove-node NODE   remove the node's container (its Node object
#                     stays until deleted; the control plane then collects
#                     its pods)
#   cluster.sh load-images IMAGE...   copy host images into every node
#   cluster.sh status   nodes, their containers, pods of kube-system
#   cluster.sh kubeconfig   print the admin kubeconfig (server on 127.0.0.1)
#   cluster.sh env    KUBECONFIG=... and KDS_KUBECTL=... lines, to eval
#   cluster.sh down   remove the nodes and the network, stop the control plane
#                     and the relay; the state dir is removed too
#
# Env:
#   KDS_CLUSTER_NAME       name (default kds): nodes are NAME-node-1, ...; the
#                          Docker network is kds-NAME; containers carry the
#                          label io.kubelet-dockershim.cluster=NAME
#   KDS_CLUSTER_STATE      state dir (default /var/lib/kubelet-dockershim/clusters/NAME)
#   KDS_CLUSTER_PORT_BASE  ports 127.0.0.1:BASE+n (default 17000): +443
#                          kube-apiserver, +379/+380 etcd, +257
#                          controller-manager, +259 scheduler
#   KDS_CLUSTER_POD_CIDR   the pod network, a 10.N.0.0/16 (default
#                          10.224.0.0/16; each node gets a /24). The host
#                          routes it to the nodes: two clusters need two)
#
# The pieces (README, "A local multi-node cluster", has the picture):
#   - node image: the `node` stage of the project's Dockerfile on
#     kubelet-dockershim/node:bookworm (scripts/node-image.sh: a debootstrap'd
#     root, no registry), with bin/kubelet, the project's kubelet.service and
#     kubeadm drop-in, and images/cluster/rootfs (kubelet config, kube-proxy
#     and pod network units); tagged kubelet-dockershim/cluster-node:dev
#   - API server: listens on the host's 127.0.0.1 only. A relay on the host
#     (systemd-socket-activate + systemd-socket-proxyd) serves
#     STATE/relay/apiserver.sock, bound into every node; in the node,
#     kds-apiserver.socket listens on 127.0.0.1:PORT (the kubeconfigs work
#     unchanged) and on 10.240.0.1:PORT, an address every node holds on its
#     loopback device, which the API server advertises: the kubernetes
#     Service's endpoint, so pods reach it at 10.96.0.1:443 through kube-proxy
#   - TLS bootstrap with the control plane's bootstrap token; kube-proxy with a
#     client certificate for system:kube-proxy
#   - pod network: the controller-manager gives each Node a /24 of
#     KDS_CLUSTER_POD_CIDR; kds-podnet (images/cluster) writes the node's CNI
#     bridge config from it and routes the other nodes' /24s via their
#     InternalIPs. The host routes each /24 to its node too (up and add-node
#     set the routes; they go with the network at down): the API server calls
#     webhooks and aggregated APIs at their pods' addresses
#   - CoreDNS v1.14.6 (kubeadm v1.37.1's) built from the Go module proxy, image
#     registry.k8s.io/coredns/coredns:v1.14.6 made here from that binary, as
#     kubeadm deploys it: Deployment coredns, Service kube-dns at 10.96.0.10.
#     No forward plugin: names outside cluster.local do not resolve (nothing
#     outside is reachable anyway)
#   - registry (with --registry-image): Debian's docker-registry in container
#     NAME-registry on the cluster's network (the node image's userland, the
#     host's binary), TLS with a CA of its own (STATE/registry), answering at
#     :443 for the images' registry hosts; every node resolves those hosts to it
#     (--add-host) and trusts the CA (/etc/docker/certs.d/HOST/ca.crt). The
#     images are pushed into it through 127.0.0.1:BASE+500, its only published
#     port
# The network is a plain bridge network, like kind's: Docker's rules for an
# --internal one drop packets whose addresses are not the network's, the pods'
# between nodes.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

NAME=${KDS_CLUSTER_NAME:-kds}
[[ $NAME =~ ^[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?$ ]] || kds_die "KDS_CLUSTER_NAME must be a DNS label of at most 22 characters: $NAME"
STATE=${KDS_CLUSTER_STATE:-/var/lib/kubelet-dockershim/clusters/$NAME}
PORT_BASE=${KDS_CLUSTER_PORT_BASE:-17000}
APISERVER_PORT=$((PORT_BASE + 443))
NETWORK=kds-$NAME
CLUSTER_LABEL=io.kubelet-dockershim.cluster
NODE_LABEL=io.kubelet-dockershim.node-container
NODE_IMAGE=kubelet-dockershim/cluster-node:dev
POD_CIDR=${KDS_CLUSTER_POD_CIDR:-10.224.0.0/16}
[[ $POD_CIDR =~ ^10\.[0-9]{1,3}\.0\.0/16$ ]] || kds_die "KDS_CLUSTER_POD_CIDR must be a 10.N.0.0/16: $POD_CIDR"
ADVERTISE=10.240.0.1
DNS_IP=10.96.0.10
COREDNS_VERSION=v1.14.6
COREDNS_IMAGE=registry.k8s.io/coredns/coredns:$COREDNS_VERSION
PAUSE_IMAGE=registry.k8s.io/pause:3.10
READY_TIMEOUT=300

usage() {
	sed -n '/^#   cluster.sh up/,/^# Env:/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

kubectl_admin() { "$BIN/kubectl" --kubeconfig "$STATE/cp/admin.conf" --request-timeout=20s "$@"; }

controlplane() {
	KDS_APISERVER_PORT=$APISERVER_PORT KDS_ETCD_PORT=$((PORT_BASE + 379)) KDS_ETCD_PEER_PORT=$((PORT_BASE + 380)) \
		KDS_CM_PORT=$((PORT_BASE + 257)) KDS_SCHEDULER_PORT=$((PORT_BASE + 259)) \
		KDS_APISERVER_ADVERTISE=$ADVERTISE KDS_CLUSTER_CIDR=$POD_CIDR \
		"$KDS_SCRIPTS/controlplane.sh" "$@"
}

# ---------------------------------------------------------------------------
# build

# build_coredns: CoreDNS from the Go module proxy (its own go.mod and go.sum:
# go install PKG@VERSION) into the control plane's bin dir, once.
build_coredns() {
	if [[ -x $BIN/coredns && $(cat "$BIN/../coredns.stamp" 2>/dev/null) == "$COREDNS_VERSION" ]]; then
		return
	fi
	kds_log "building CoreDNS $COREDNS_VERSION (cold: about 3 min)"
	(cd / && CGO_ENABLED=0 GOBIN=$BIN go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@$COREDNS_VERSION")
	echo "$COREDNS_VERSION" >"$BIN/../coredns.stamp"
}

# coredns_image: the CoreDNS image from the binary (upstream's image is the
# binary on a distroless base; no base is needed: it is static), unless the
# binary in it is the current one.
coredns_image() {
	local sum dir
	sum=$(sha256sum "$BIN/coredns" | cut -c1-16)
	if [[ $(docker image inspect -f '{{ index .Config.Labels "io.kubelet-dockershim.binary" }}' "$COREDNS_IMAGE" 2>/dev/null) == "$sum" ]]; then
		return
	fi
	dir=$(mktemp -d)
	install -D -m 755 "$BIN/coredns" "$dir/coredns"
	tar --numeric-owner --owner=0 --group=0 -C "$dir" -c coredns |
		docker import --change 'ENTRYPOINT ["/coredns"]' --change 'EXPOSE 53 53/udp 9153' \
			--change "LABEL io.kubelet-dockershim.binary=$sum" - "$COREDNS_IMAGE" >/dev/null
	rm -rf "$dir"
	kds_log "built image $COREDNS_IMAGE from CoreDNS $COREDNS_VERSION"
}

# node_image: the Dockerfile's node stage with the current bin/kubelet. The
# classic builder builds every stage up to the target: `node` is the first.
node_image() {
	kds_log "building $NODE_IMAGE (Dockerfile, target node)"
	DOCKER_BUILDKIT=0 docker build -q --target node -t "$NODE_IMAGE" "$KDS_ROOT" >/dev/null
}

build_all() {
	"$KDS_SCRIPTS/prepare-host.sh"
	kds_build_kubelet
	BIN=$("$KDS_SCRIPTS/build-controlplane.sh")
	build_coredns
	coredns_image
	docker image inspect "$PAUSE_IMAGE" >/dev/null 2>&1 || kds_die "$PAUSE_IMAGE is missing (scripts/build-images.sh makes it)"
	node_image
}

# ---------------------------------------------------------------------------
# relay: the host's end of the nodes' way to the API server

relay_pid() {
	local pid
	[[ -s $STATE/relay.pid ]] || return 1
	pid=$(<"$STATE/relay.pid")
	[[ $(readlink "/proc/$pid/exe" 2>/dev/null) == */systemd-socket-@(activate|proxyd) ]] || return 1
	echo "$pid"
}

start_relay() {
	relay_pid >/dev/null && return
	mkdir -p "$STATE/relay"
	rm -f "$STATE/relay/apiserver.sock"
	# systemd-socket-activate binds the socket and execs the proxy with it
	# (one process, many connections); in its own session. SIGPIPE ignored:
	# systemd-socket-proxyd (v252) leaves it at its default, and a client
	# closing while a response is spliced to it killed the proxy, cutting
	# every node off the API server.
	(
		trap '' PIPE
		kds_spawn "$STATE/relay.pid" "$STATE/relay.log" \
			/usr/bin/systemd-socket-activate -l "$STATE/relay/apiserver.sock" \
			/lib/systemd/systemd-socket-proxyd "127.0.0.1:$APISERVER_PORT" 8>&-
	)
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -S $STATE/relay/apiserver.sock ]] && return
		sleep 0.05
	done
	kds_die "the API server relay did not start (log: $STATE/relay.log)"
}

stop_relay() {
	local pid
	pid=$(relay_pid) || return 0
	kill "$pid" 2>/dev/null || true
	rm -f "$STATE/relay.pid"
}

# ---------------------------------------------------------------------------
# registry: the images the nodes may pull

REGISTRY_CONTAINER=$NAME-registry
REGISTRY_PORT=$((PORT_BASE + 500))

# registry_host IMAGE: the registry host of IMAGE, its first path component,
# which must be a host name without a port (the registry answers at 443).
registry_host() {
	local host=${1%%/*}
	[[ $1 == */* && $host == *.* && $host != *:* ]] ||
		kds_die "--registry-image $1 names no registry host without a port (such as registry.k8s.io/...)"
	echo "$host"
}

# start_registry IMAGE...: the registry container, with a CA and a serving
# certificate for the images' hosts, then the images pushed into it.
start_registry() {
	local r=$STATE/registry hosts=() img h ip
	for img in "$@"; do
		h=$(registry_host "$img")
		[[ " ${hosts[*]} " == *" $h "* ]] || hosts+=("$h")
	done
	mkdir -p "$r"
	printf '%s\n' "${hosts[@]}" >"$r/hosts"
	kds_tls_registry "$r" /registry :443 "kubelet-dockershim cluster $NAME registry CA" "${hosts[@]}"
	docker run -d --name "$REGISTRY_CONTAINER" --label "$CLUSTER_LABEL=$NAME" --network "$NETWORK" \
		-p "127.0.0.1:$REGISTRY_PORT:443" -v "$r:/registry" -v /usr/bin/docker-registry:/usr/bin/docker-registry:ro \
		--entrypoint /usr/bin/docker-registry kubelet-dockershim/node:bookworm serve /registry/config.yml >/dev/null
	ip=$(docker inspect -f "{{ (index .NetworkSettings.Networks \"$NETWORK\").IPAddress }}" "$REGISTRY_CONTAINER")
	[[ -n $ip ]] || kds_die "the registry container has no address on $NETWORK"
	echo "$ip" >"$r/ip"
	local deadline=$((SECONDS + 30))
	until curl -sf --cacert "$r/ca.crt" --resolve "${hosts[0]}:$REGISTRY_PORT:127.0.0.1" \
		"https://${hosts[0]}:$REGISTRY_PORT/v2/" >/dev/null; do
		((SECONDS < deadline)) || kds_die "the registry does not answer ($(docker logs --tail 3 "$REGISTRY_CONTAINER" 2>&1))"
		sleep 0.2
	done
	# Pushed as 127.0.0.1:PORT/PATH (the host's dockerd pushes to loopback
	# registries without verifying them); the nodes pull HOST/PATH.
	local local_name
	for img in "$@"; do
		local_name=127.0.0.1:$REGISTRY_PORT/${img#*/}
		docker tag "$img" "$local_name"
		docker push -q "$local_name" >/dev/null || kds_die "push of $img to the cluster's registry failed"
		docker rmi "$local_name" >/dev/null
		kds_log "the cluster's registry serves $img"
	done
}

# registry_args: the docker create arguments that send a node's pulls from
# the registry's hosts to the registry container.
registry_args() {
	[[ -s $STATE/registry/ip ]] || return 0
	local h ip
	ip=$(<"$STATE/registry/ip")
	while read -r h; do
		echo "--add-host=$h:$ip"
	done <"$STATE/registry/hosts"
}

# ---------------------------------------------------------------------------
# nodes

ensure_network() {
	docker network inspect "$NETWORK" >/dev/null 2>&1 && return
	docker network create --label "$CLUSTER_LABEL=$NAME" "$NETWORK" >/dev/null
	kds_log "created Docker network $NETWORK ($(docker network inspect -f '{{range .IPAM.Config}}{{.Subnet}}{{end}}' "$NETWORK"))"
}

# cluster_files DIR: the files of this cluster a node gets before it boots.
cluster_files() {
	local dir=$1
	install -D -m 600 "$STATE/cp/bootstrap-kubelet.conf" "$dir/etc/kubernetes/bootstrap-kubelet.conf"
	install -D -m 600 "$STATE/cp/kube-proxy.conf" "$dir/etc/kubernetes/kube-proxy.conf"
	install -D -m 644 "$STATE/cp/pki/ca.crt" "$dir/etc/kubernetes/pki/ca.crt"
	install -D -m 755 "$BIN/kube-proxy" "$dir/usr/bin/kube-proxy"
	install -D -m 755 "$BIN/kubectl" "$dir/usr/bin/kubectl"
	cat >"$dir/etc/kubernetes/kube-proxy.yaml" <<-EOF
		# kube-proxy's configuration on a node of cluster $NAME (scripts/cluster.sh).
		apiVersion: kubeproxy.config.k8s.io/v1alpha1
		kind: KubeProxyConfiguration
		clientConnection:
		  kubeconfig: /etc/kubernetes/kube-proxy.conf
		mode: iptables
		clusterCIDR: $POD_CIDR
		# nf_conntrack_max is the host's, not the node's: left alone (kind
		# does the same). The TCP timeouts are per network namespace.
		conntrack:
		  maxPerCore: 0
		metricsBindAddress: 127.0.0.1:10249
		healthzBindAddress: 127.0.0.1:10256
	EOF
	install -d "$dir/etc/systemd/system/sockets.target.wants"
	cat >"$dir/etc/systemd/system/kds-apiserver.socket" <<-EOF
		# The cluster's API server in this node (scripts/cluster.sh): at
		# 127.0.0.1 for the kubeconfigs, and at $ADVERTISE, the address the
		# API server advertises (the kubernetes Service's endpoint), which
		# every node holds on its loopback device.
		[Unit]
		Description=the cluster's API server, relayed to the host's loopback

		[Socket]
		ExecStartPre=/sbin/ip address replace $ADVERTISE/32 dev lo
		ListenStream=127.0.0.1:$APISERVER_PORT
		ListenStream=$ADVERTISE:$APISERVER_PORT

		[Install]
		WantedBy=sockets.target
	EOF
	ln -s ../kds-apiserver.socket "$dir/etc/systemd/system/sockets.target.wants/kds-apiserver.socket"
	if [[ -s $STATE/registry/hosts ]]; then
		local h
		while read -r h; do
			install -D -m 644 "$STATE/registry/ca.crt" "$dir/etc/docker/certs.d/$h/ca.crt"
		done <"$STATE/registry/hosts"
	fi
}

next_index() {
	local i
	i=$(cat "$STATE/next-index" 2>/dev/null || echo 1)
	echo $((i + 1)) >"$STATE/next-index"
	echo "$i"
}

# create_node: a new node container, started; its name is appended to NEW.
create_node() {
	local node id files reg
	node=$NAME-node-$(next_index)
	mapfile -t reg < <(registry_args)
	id=$("$KDS_SCRIPTS/node-container.sh" create "$node" "$NODE_IMAGE" \
		--label "$CLUSTER_LABEL=$NAME" --label "$NODE_LABEL=$node" \
		--network "$NETWORK" -v "$STATE/relay:/var/lib/kds-loopback" "${reg[@]}")
	files=$(mktemp -d)
	cluster_files "$files"
	tar -C "$files" -c . | docker cp - "$id:/"
	rm -rf "$files"
	docker start "$id" >/dev/null
	NEW+=("$node")
}

# wait_booted NODE: systemd running, the inner dockerd answering.
wait_booted() {
	local node=$1 deadline=$((SECONDS + 180)) state
	while :; do
		# Until node-entrypoint has exec'ed systemd, systemctl says "offline".
		state=$(docker exec "$node" sh -c 'read -r c </proc/1/comm && [ "$c" = systemd ] && systemctl is-system-running' 2>/dev/null || true)
		case $state in
		running) break ;;
		degraded | maintenance | stopping | offline)
			docker exec "$node" systemctl list-units --failed --no-pager >&2 || true
			kds_die "node $node: systemd is $state"
			;;
		esac
		((SECONDS < deadline)) || kds_die "node $node: systemd is still '$state' after 180 s"
		sleep 0.5
	done
	until docker exec "$node" docker version >/dev/null 2>&1; do
		((SECONDS < deadline)) || kds_die "node $node: its dockerd does not answer"
		sleep 0.5
	done
}

# load_images NODE IMAGE...: copy host images into the node's dockerd.
load_images() {
	local node=$1
	shift
	docker save "$@" | docker exec -i "$node" docker load -q >/dev/null
}

nodes() { docker ps -a --filter "label=$CLUSTER_LABEL=$NAME" --filter "label=$NODE_LABEL" --format '{{.Names}}' | sort -V; }

# add_nodes COUNT IMAGE...: create COUNT nodes, boot them in parallel and
# load each with the images; their names in NEW.
NEW=()
add_nodes() {
	local count=$1 i pids=()
	shift
	NEW=()
	for ((i = 0; i < count; i++)); do
		create_node
		(wait_booted "${NEW[i]}" && load_images "${NEW[i]}" "$PAUSE_IMAGE" "$COREDNS_IMAGE" "$@") &
		pids+=($!)
	done
	wait_jobs "did not come up" "${NEW[@]}" -- "${pids[@]}"
}

# wait_jobs WHAT NODE... -- PID...: wait for each background job; the first
# that failed ends the script with "node NODE WHAT".
wait_jobs() {
	local what=$1 names=() i
	shift
	while [[ $1 != -- ]]; do
		names+=("$1")
		shift
	done
	shift
	for ((i = 1; i <= $#; i++)); do
		wait "${!i}" || kds_die "node ${names[i - 1]} $what"
	done
}

# host_routes: the host's route to each node's pods (for the API server).
host_routes() {
	local name cidr ip
	while read -r name cidr ip; do
		[[ -n $cidr && -n $ip ]] || continue
		ip route replace "$cidr" via "$ip" || kds_die "cannot route $cidr to node $name ($ip)"
	done < <(kubectl_admin get nodes -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.spec.podCIDR}{" "}{range .status.addresses[?(@.type=="InternalIP")]}{.address}{end}{"\n"}{end}')
}

wait_ready() {
	local deadline=$((SECONDS + READY_TIMEOUT))
	until kubectl_admin wait --for=condition=Ready "node/$1" --timeout=10s >/dev/null 2>&1; do
		if ((SECONDS >= deadline)); then
			kubectl_admin get nodes -o wide >&2 || true
			docker exec "$1" journalctl -u kubelet -u kds-podnet --no-pager -n 30 >&2 || true
			kds_die "node $1 is not Ready after ${READY_TIMEOUT}s"
		fi
		sleep 1
	done
}

# ---------------------------------------------------------------------------
# CoreDNS, as kubeadm v1.37.1 deploys it (its RBAC, ConfigMap, Deployment
# and Service), minus the forward plugin

apply_coredns() {
	kubectl_admin apply -f - >/dev/null <<-EOF
		apiVersion: v1
		kind: ServiceAccount
		metadata:
		  name: coredns
		  namespace: kube-system
		---
		apiVersion: rbac.authorization.k8s.io/v1
		kind: ClusterRole
		metadata:
		  name: system:coredns
		rules:
		- apiGroups: [""]
		  resources: [endpoints, services, pods, namespaces]
		  verbs: [list, watch]
		- apiGroups: [""]
		  resources: [nodes]
		  verbs: [get]
		- apiGroups: [discovery.k8s.io]
		  resources: [endpointslices]
		  verbs: [list, watch]
		---
		apiVersion: rbac.authorization.k8s.io/v1
		kind: ClusterRoleBinding
		metadata:
		  name: system:coredns
		roleRef:
		  apiGroup: rbac.authorization.k8s.io
		  kind: ClusterRole
		  name: system:coredns
		subjects:
		- kind: ServiceAccount
		  name: coredns
		  namespace: kube-system
		---
		apiVersion: v1
		kind: ConfigMap
		metadata:
		  name: coredns
		  namespace: kube-system
		data:
		  Corefile: |
		    .:53 {
		        errors
		        health {
		           lameduck 5s
		        }
		        ready
		        kubernetes cluster.local in-addr.arpa ip6.arpa {
		           pods insecure
		           fallthrough in-addr.arpa ip6.arpa
		           ttl 30
		        }
		        prometheus :9153
		        cache 30
		        loop
		        reload
		        loadbalance
		    }
		---
		apiVersion: apps/v1
		kind: Deployment
		metadata:
		  name: coredns
		  namespace: kube-system
		  labels: {k8s-app: kube-dns}
		spec:
		  replicas: 2
		  strategy:
		    type: RollingUpdate
		    rollingUpdate: {maxUnavailable: 1}
		  selector:
		    matchLabels: {k8s-app: kube-dns}
		  template:
		    metadata:
		      labels: {k8s-app: kube-dns}
		    spec:
		      priorityClassName: system-cluster-critical
		      serviceAccountName: coredns
		      affinity:
		        podAntiAffinity:
		          preferredDuringSchedulingIgnoredDuringExecution:
		          - weight: 100
		            podAffinityTerm:
		              labelSelector:
		                matchExpressions:
		                - {key: k8s-app, operator: In, values: [kube-dns]}
		              topologyKey: kubernetes.io/hostname
		      tolerations:
		      - {key: CriticalAddonsOnly, operator: Exists}
		      - {key: node-role.kubernetes.io/control-plane, effect: NoSchedule}
		      nodeSelector:
		        kubernetes.io/os: linux
		      containers:
		      - name: coredns
		        image: $COREDNS_IMAGE
		        imagePullPolicy: IfNotPresent
		        resources:
		          limits: {memory: 170Mi}
		          requests: {cpu: 100m, memory: 70Mi}
		        args: [-conf, /etc/coredns/Corefile]
		        volumeMounts:
		        - {name: config-volume, mountPath: /etc/coredns, readOnly: true}
		        ports:
		        - {containerPort: 53, name: dns, protocol: UDP}
		        - {containerPort: 53, name: dns-tcp, protocol: TCP}
		        - {containerPort: 9153, name: metrics, protocol: TCP}
		        securityContext:
		          allowPrivilegeEscalation: false
		          capabilities:
		            add: [NET_BIND_SERVICE]
		            drop: [ALL]
		          readOnlyRootFilesystem: true
		        livenessProbe:
		          httpGet: {path: /health, port: 8080, scheme: HTTP}
		          initialDelaySeconds: 60
		          timeoutSeconds: 5
		          successThreshold: 1
		          failureThreshold: 5
		        readinessProbe:
		          httpGet: {path: /ready, port: 8181, scheme: HTTP}
		      dnsPolicy: Default
		      volumes:
		      - name: config-volume
		        configMap:
		          name: coredns
		          items:
		          - {key: Corefile, path: Corefile}
		---
		apiVersion: v1
		kind: Service
		metadata:
		  name: kube-dns
		  namespace: kube-system
		  labels: {k8s-app: kube-dns, kubernetes.io/cluster-service: "true", kubernetes.io/name: CoreDNS}
		  annotations: {prometheus.io/port: "9153", prometheus.io/scrape: "true"}
		spec:
		  selector: {k8s-app: kube-dns}
		  clusterIP: $DNS_IP
		  ports:
		  - {name: dns, port: 53, protocol: UDP, targetPort: 53}
		  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}
		  - {name: metrics, port: 9153, protocol: TCP, targetPort: 9153}
	EOF
}

# ---------------------------------------------------------------------------
# commands

# parse_opts ARGS...: NODES from --nodes, IMAGES from --image and
# REGISTRY_IMAGES from --registry-image options.
IMAGES=()
REGISTRY_IMAGES=()
NODES=3
parse_opts() {
	while (($#)); do
		case $1 in
		--nodes)
			[[ ${2:-} =~ ^[1-9][0-9]?$ ]] || kds_die "--nodes needs a number from 1 to 99"
			NODES=$2
			shift 2
			;;
		--image | --registry-image)
			[[ -n ${2:-} ]] || kds_die "$1 needs an image"
			docker image inspect "$2" >/dev/null 2>&1 || kds_die "image $2 is not in the host's dockerd"
			if [[ $1 == --image ]]; then
				IMAGES+=("$2")
			else
				registry_host "$2" >/dev/null
				REGISTRY_IMAGES+=("$2")
			fi
			shift 2
			;;
		*) usage ;;
		esac
	done
}

cmd_up() {
	local start=$SECONDS node
	parse_opts "$@"
	mkdir -p "$STATE"
	exec 8>"$STATE/lock"
	flock -n 8 || kds_die "another cluster.sh runs on $STATE"
	if [[ -n $(nodes) ]]; then
		kds_die "cluster $NAME has nodes already ($(nodes | tr '\n' ' ')): add-node adds one, down removes them"
	fi
	build_all
	# Not holding the lock: the components outlive this run.
	controlplane up "$STATE/cp" 8>&-
	start_relay
	ensure_network
	if ((${#REGISTRY_IMAGES[@]})); then
		start_registry "${REGISTRY_IMAGES[@]}"
	fi
	add_nodes "$NODES" "${IMAGES[@]}"
	apply_coredns
	for node in "${NEW[@]}"; do
		wait_ready "$node"
	done
	host_routes
	kubectl_admin -n kube-system rollout status deployment/coredns --timeout="${READY_TIMEOUT}s" >/dev/null ||
		kds_die "CoreDNS is not available (kubectl -n kube-system describe pods -l k8s-app=kube-dns)"
	kds_log "cluster $NAME up in $((SECONDS - start))s: ${#NEW[@]} nodes Ready, CoreDNS available"
	kds_log "kubectl: $BIN/kubectl --kubeconfig $STATE/cp/admin.conf (or: eval \"\$(KDS_CLUSTER_NAME=$NAME $0 env)\")"
}

require_up() {
	[[ -s $STATE/cp/admin.conf ]] || kds_die "no cluster $NAME (run: $0 up)"
	BIN=$(<"$STATE/cp/bin-dir")
}

cmd_add_node() {
	parse_opts "$@"
	((${#REGISTRY_IMAGES[@]} == 0)) || kds_die "--registry-image is for up (add-node gives a new node the cluster's registry)"
	require_up
	start_relay
	add_nodes 1 "${IMAGES[@]}"
	wait_ready "${NEW[0]}"
	host_routes
	echo "${NEW[0]}"
}

cmd_remove_node() {
	(($# == 1)) || usage
	require_up
	[[ $(docker inspect -f "{{ index .Config.Labels \"$CLUSTER_LABEL\" }}" "$1" 2>/dev/null) == "$NAME" ]] ||
		kds_die "$1 is no node of cluster $NAME"
	docker rm -f -v "$1" >/dev/null
	kds_log "removed node container $1"
}

cmd_load_images() {
	(($# >= 1)) || usage
	require_up
	local node names=() pids=()
	for node in $(nodes); do
		load_images "$node" "$@" &
		names+=("$node")
		pids+=($!)
	done
	wait_jobs "did not load the images" "${names[@]}" -- "${pids[@]}"
}

cmd_status() {
	require_up
	echo "cluster $NAME: state $STATE, API server https://127.0.0.1:$APISERVER_PORT"
	docker ps -a --filter "label=$CLUSTER_LABEL=$NAME" --format 'table {{.Names}}\t{{.Status}}\t{{.Networks}}'
	kubectl_admin get nodes -o wide
	kubectl_admin -n kube-system get pods -o wide
}

cmd_down() {
	local ids
	ids=$(docker ps -aq --filter "label=$CLUSTER_LABEL=$NAME")
	if [[ -n $ids ]]; then
		# shellcheck disable=SC2086 # one ID a word
		docker rm -f -v $ids >/dev/null
	fi
	if docker network inspect "$NETWORK" >/dev/null 2>&1; then
		docker network rm "$NETWORK" >/dev/null
	fi
	[[ -d $STATE ]] || return 0
	controlplane down "$STATE/cp"
	stop_relay
	rm -rf "$STATE"
	kds_log "cluster $NAME removed"
}

kds_require_root "$@"
(($# >= 1)) || usage
cmd=$1
shift
case $cmd in
up) cmd_up "$@" ;;
add-node) cmd_add_node "$@" ;;
remove-node) cmd_remove_node "$@" ;;
load-images) cmd_load_images "$@" ;;
status) cmd_status ;;
kubeconfig)
	require_up
	cat "$STATE/cp/admin.conf"
	;;
env)
	require_up
	printf 'KUBECONFIG=%q\nKDS_KUBECTL=%q\n' "$STATE/cp/admin.conf" "$BIN/kubectl"
	;;
down) cmd_down ;;
*) usage ;;
esac
