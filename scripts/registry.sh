#!/usr/bin/env bash
# registry.sh: the image registries of the pull tests, on loopback only.
#
#   registry.sh up STATE_DIR    start Debian's docker-registry twice:
#                                 127.0.0.1:5000  plain HTTP, no auth
#                                 127.0.0.1:5001  HTTP with htpasswd auth
#                                                 (testuser / testpass)
#                               push kubelet-dockershim/busybox:latest to
#                                 127.0.0.1:5000/kubelet-dockershim/busybox:latest
#                                 127.0.0.1:5001/private/busybox:latest
#                               and print the DOCKERSHIM_TEST_* lines the tests
#                               read (stdout; progress goes to stderr).
#   registry.sh down STATE_DIR  stop the registries whose pids are in STATE_DIR.
#
# Config, htpasswd, blobs, logs and pid files live in STATE_DIR. dockerd treats
# 127.0.0.0/8 registries as insecure, so plain HTTP needs no daemon change.
# The docker login uses a temporary DOCKER_CONFIG: the host's is not touched.
# Needs: docker-registry, apache2-utils (htpasswd), a dockerd that answers, and
# kubelet-dockershim/busybox:latest (scripts/build-images.sh).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

PLAIN_ADDR=127.0.0.1:5000
AUTH_ADDR=127.0.0.1:5001
AUTH_USER=testuser
AUTH_PASS=testpass
SOURCE_IMAGE=kubelet-dockershim/busybox:latest
PLAIN_IMAGE=$PLAIN_ADDR/kubelet-dockershim/busybox:latest
AUTH_IMAGE=$AUTH_ADDR/private/busybox:latest

usage() {
	echo "usage: $0 up|down STATE_DIR" >&2
	exit 2
}

# http_status ADDR PATH: the HTTP status code of GET PATH, empty when nothing
# answers. Plain bash (/dev/tcp): curl is not part of a fresh install.
http_status() {
	local host=${1%:*} port=${1##*:} path=$2
	# shellcheck disable=SC2016 # expanded by the inner bash
	timeout 2 bash -c '
		exec 3<>"/dev/tcp/$0/$1" || exit 1
		printf "GET %s HTTP/1.0\r\nHost: %s:%s\r\n\r\n" "$2" "$0" "$1" >&3
		read -r _ code _ <&3 && echo "$code"' "$host" "$port" "$path" 2>/dev/null || true
}

# write_config NAME ADDR [htpasswd]: a registry config under STATE/NAME.
write_config() {
	local name=$1 addr=$2 auth=${3:-}
	mkdir -p "$STATE/$name/data"
	{
		cat <<-EOF
			version: 0.1
			log:
			  level: warn
			  accesslog:
			    disabled: true
			storage:
			  filesystem:
			    rootdirectory: $STATE/$name/data
			  delete:
			    enabled: true
			http:
			  addr: $addr
		EOF
		if [[ -n $auth ]]; then
			cat <<-EOF
				auth:
				  htpasswd:
				    realm: kubelet-dockershim-test
				    path: $STATE/htpasswd
			EOF
		fi
	} >"$STATE/$name/config.yml"
}

# registry_pid NAME: the pid in STATE/NAME/registry.pid if that process is
# alive and still a docker-registry (not a reused pid).
registry_pid() {
	local f=$STATE/$1/registry.pid pid cmdline
	[[ -s $f ]] || return 1
	pid=$(<"$f")
	cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
	# A zombie has an empty cmdline: it counts as gone.
	[[ $cmdline == *docker-registry* ]] || return 1
	echo "$pid"
}

# start NAME ADDR WANT_STATUS: start one registry unless ours already runs.
start() {
	local name=$1 addr=$2 want=$3
	if registry_pid "$name" >/dev/null; then
		kds_log "$name registry already running on $addr"
		return
	fi
	if [[ -n $(http_status "$addr" /v2/) ]]; then
		kds_die "$addr is already taken by another process"
	fi
	# In its own session: a Ctrl-C meant for the tests does not reach it;
	# `down` stops it by pid. The inner shell records its own pid, which
	# exec hands on to docker-registry.
	local pidfile=$STATE/$name/registry.pid
	rm -f "$pidfile"
	# shellcheck disable=SC2016 # expanded by the inner bash
	setsid bash -c 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec docker-registry serve "$1" >"$2" 2>&1 </dev/null' \
		"$pidfile" "$STATE/$name/config.yml" "$STATE/$name/registry.log" &
	local i code=
	for ((i = 0; i < 50; i++)); do
		[[ -s $pidfile ]] && break
		sleep 0.1
	done
	for ((i = 0; i < 100; i++)); do
		code=$(http_status "$addr" /v2/)
		[[ $code == "$want" ]] && break
		registry_pid "$name" >/dev/null || break
		sleep 0.1
	done
	if [[ $code != "$want" ]]; then
		tail -n 5 "$STATE/$name/registry.log" >&2 || true
		kds_die "$name registry on $addr answered '${code:-nothing}' instead of $want"
	fi
	kds_log "$name registry on http://$addr (pid $(<"$STATE/$name/registry.pid"))"
}

# push SOURCE TARGET: push SOURCE under the name TARGET, then drop the local
# TARGET tag again so that pull tests really pull.
push() {
	docker tag "$1" "$2"
	if ! docker push "$2" >"$STATE/push.log" 2>&1; then
		cat "$STATE/push.log" >&2
		docker rmi "$2" >/dev/null 2>&1 || true
		kds_die "docker push $2 failed"
	fi
	docker rmi "$2" >/dev/null
	kds_log "pushed $2"
}

up() {
	command -v docker-registry >/dev/null || kds_die "docker-registry missing (apt-get install docker-registry)"
	command -v htpasswd >/dev/null || kds_die "htpasswd missing (apt-get install apache2-utils)"
	kds_docker_answers || kds_die "dockerd does not answer (run scripts/prepare-host.sh)"
	docker image inspect "$SOURCE_IMAGE" >/dev/null 2>&1 ||
		kds_die "$SOURCE_IMAGE missing (run scripts/build-images.sh)"

	htpasswd -Bbn "$AUTH_USER" "$AUTH_PASS" >"$STATE/htpasswd"
	write_config plain "$PLAIN_ADDR"
	write_config auth "$AUTH_ADDR" htpasswd
	start plain "$PLAIN_ADDR" 200
	start auth "$AUTH_ADDR" 401

	export DOCKER_CONFIG=$STATE/docker-config
	mkdir -p "$DOCKER_CONFIG"
	push "$SOURCE_IMAGE" "$PLAIN_IMAGE"
	docker login "$AUTH_ADDR" -u "$AUTH_USER" --password-stdin <<<"$AUTH_PASS" >/dev/null 2>"$STATE/login.log" || {
		cat "$STATE/login.log" >&2
		kds_die "docker login $AUTH_ADDR failed"
	}
	push "$SOURCE_IMAGE" "$AUTH_IMAGE"
	docker logout "$AUTH_ADDR" >/dev/null 2>&1 || true
	rm -rf "$DOCKER_CONFIG"

	echo "DOCKERSHIM_TEST_REGISTRY=$PLAIN_ADDR"
	echo "DOCKERSHIM_TEST_AUTH_REGISTRY=$AUTH_ADDR"
	echo "DOCKERSHIM_TEST_AUTH_USER=$AUTH_USER"
	echo "DOCKERSHIM_TEST_AUTH_PASS=$AUTH_PASS"
}

# stop NAME: SIGTERM the registry, SIGKILL after 5s.
stop() {
	local name=$1 pid i
	pid=$(registry_pid "$name") || {
		rm -f "$STATE/$name/registry.pid"
		return 0
	}
	kill "$pid" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$STATE/$name/registry.pid"
	kds_log "$name registry stopped (pid $pid)"
}

down() {
	stop plain
	stop auth
}

(($# == 2)) || usage
case $1 in
up)
	mkdir -p "$2"
	STATE=$(cd "$2" && pwd)
	up
	;;
down)
	[[ -d $2 ]] || exit 0
	STATE=$(cd "$2" && pwd)
	down
	;;
*) usage ;;
esac
