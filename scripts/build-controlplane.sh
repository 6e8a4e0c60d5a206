#!/usr/bin/env bash
# build-controlplane.sh: build a real Kubernetes control plane for end-to-end tests:
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (k8s.io/kubernetes
# v1.37.1), upstream's kubelet as upstream-kubelet (what this kubelet's flags and
# feature gates are compared with), cri-dockerd v0.4.3 (its own module,
# scripts/cridockerd), staticpoduid (upstream's static pod UIDs),
# csimockdriver (upstream's mock CSI driver) and etcd (go.etcd.io/etcd/server/v3 at the version Kubernetes pins), from
# the throwaway module in scripts/controlplane (never the product's go.mod). The
# binaries are cached in $KDS_CONTROLPLANE_DIR (default /var/cache/kubelet-dockershim/
# controlplane) and rebuilt only when scripts/controlplane changes: a cold build takes
# 8 to 13 minutes on 2 cores. Prints the bin directory.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

K8S_VERSION=v1.37.1
OUT=${KDS_CONTROLPLANE_DIR:-/var/cache/kubelet-dockershim/controlplane}
MOD="$KDS_SCRIPTS/controlplane"

kds_ensure_go
mkdir -p "$OUT"
# One build at a time: tests may call this script concurrently.
exec 9>"$OUT/.lock"
flock 9
# build_tool NAME: a small tool of the module (./NAME), with a stamp of its own.
build_tool() {
	local name=$1 stamp
	stamp=$(cat "$MOD/go.mod" "$MOD/go.sum" "$MOD/$name/main.go" | sha256sum | cut -c1-16)
	if [[ ! -x $OUT/bin/$name || $(cat "$OUT/$name.stamp" 2>/dev/null) != "$stamp" ]]; then
		kds_log "building $name"
		mkdir -p "$OUT/bin"
		(cd "$MOD" && CGO_ENABLED=0 go build -trimpath -o "$OUT/bin/$name" "./$name")
		echo "$stamp" >"$OUT/$name.stamp"
	fi
}
# staticpoduid prints the UIDs upstream's kubelet gives static pods (the
# golden test of this kubelet's); csimockdriver serves upstream's mock CSI
# driver (Kubernetes' own storage e2e driver) for the CSI e2e test.
build_tool staticpoduid
build_tool csimockdriver
# cri-dockerd v0.4.3 (the live switch from upstream's kubelet on cri-dockerd):
# its own throwaway module, because it pins k8s.io/kubernetes v1.29; a cold
# build takes about 2.5 minutes, then it is cached with its own stamp.
CD_MOD="$KDS_SCRIPTS/cridockerd"
cd_stamp=$(cat "$CD_MOD/go.mod" "$CD_MOD/go.sum" "$CD_MOD/tools.go" | sha256sum | cut -c1-16)
if [[ ! -x $OUT/bin/cri-dockerd || $(cat "$OUT/cri-dockerd.stamp" 2>/dev/null) != "$cd_stamp" ]]; then
	kds_log "building cri-dockerd v0.4.3 (cold: about 2.5 min)"
	mkdir -p "$OUT/bin"
	(cd "$CD_MOD" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/Mirantis/cri-dockerd/cmd/version.Version=0.4.3" \
		-o "$OUT/bin/cri-dockerd" github.com/Mirantis/cri-dockerd)
	echo "$cd_stamp" >"$OUT/cri-dockerd.stamp"
fi
stamp=$(cat "$MOD/go.mod" "$MOD/go.sum" "$MOD/tools.go" "$0" | sha256sum | cut -c1-16)
if [[ -f $OUT/stamp && $(cat "$OUT/stamp") == "$stamp" ]]; then
	kds_log "control plane binaries are up to date in $OUT/bin"
	echo "$OUT/bin"
	exit 0
fi
mkdir -p "$OUT/bin"
# Version stamps: without them the binaries report v0.0.0-master and kubectl refuses
# the server.
ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=37"
	ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
cd "$MOD"
start=$SECONDS
kds_log "building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kube-proxy, kubelet $K8S_VERSION (cold: 8-13 min)"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ldflags" -o "$OUT/bin/" \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl \
	k8s.io/kubernetes/cmd/kube-proxy
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ldflags" -o "$OUT/bin/upstream-kubelet" k8s.io/kubernetes/cmd/kubelet
kds_log "building etcd"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$OUT/bin/etcd" go.etcd.io/etcd/server/v3
echo "$stamp" >"$OUT/stamp"
kds_log "built in $((SECONDS - start))s: $(ls "$OUT/bin" | tr '\n' ' ')"
echo "$OUT/bin"
