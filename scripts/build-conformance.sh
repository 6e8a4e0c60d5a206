#!/usr/bin/env bash
# build-conformance.sh: build upstream's node e2e tooling for scripts/conformance.sh,
# from the throwaway module in scripts/conformance (never the product's go.mod, and
# apart from scripts/controlplane so that the control plane's cache stays valid):
#
#   e2e.test  k8s.io/kubernetes/test/e2e at v1.37.1 (`go test -c`)
#   ginkgo    the ginkgo v2 CLI at the version Kubernetes pins
#   agnhost   k8s.io/kubernetes/test/images/agnhost, static (CGO_ENABLED=0)
#   nnp       k8s.io/kubernetes/test/images/nonewprivs (the nonewprivs image's
#             program), static
#   sample-apiserver  k8s.io/sample-apiserver (v0.37.1, the module's), static:
#             the sample-apiserver image's program (the aggregator specs)
#   specs     scripts/conformance/specs: spec lists, shards and summaries from
#             ginkgo's JSON reports
#
# The binaries are cached in $KDS_CONFORMANCE_DIR/bin (default
# /var/cache/kubelet-dockershim/conformance/bin) and rebuilt only when their
# inputs change (go.mod, go.sum, tools.go and the build command; specs/main.go
# for specs). A cold build of e2e.test takes 10 to 20 minutes on 2 cores (less when
# the control plane's packages are in the Go build cache). Prints the bin
# directory.
#
#   build-conformance.sh [NAME...]   only the named binaries (default: all)
#
# Each binary is built by one process at a time (flock on
# $KDS_CONFORMANCE_DIR/NAME.lock): concurrent callers wait for it.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

K8S_VERSION=v1.37.1
OUT=${KDS_CONFORMANCE_DIR:-$KDS_CACHE_DIR/conformance}
MOD="$KDS_SCRIPTS/conformance"

kds_ensure_go
mkdir -p "$OUT/bin"
WANT=" ${*:-specs ginkgo agnhost nnp sample-apiserver e2e.test} "

# build NAME INPUTS... -- COMMAND...: run COMMAND (in $MOD) when $OUT/bin/NAME
# is missing or its stamp (INPUTS' contents and COMMAND) changed.
build() {
	local name=$1 stamp inputs=() start=$SECONDS
	shift
	while [[ $1 != -- ]]; do
		inputs+=("$1")
		shift
	done
	shift
	[[ $WANT == *" $name "* ]] || return 0
	stamp=$({
		cat "${inputs[@]}"
		echo "$*"
	} | sha256sum | cut -c1-16)
	exec {lock}>"$OUT/$name.lock"
	flock "$lock"
	if [[ ! -x $OUT/bin/$name || $(cat "$OUT/$name.stamp" 2>/dev/null) != "$stamp" ]]; then
		kds_log "building $name"
		rm -f "$OUT/$name.stamp"
		(cd "$MOD" && "$@")
		echo "$stamp" >"$OUT/$name.stamp"
		kds_log "built $name in $((SECONDS - start))s"
	fi
	exec {lock}>&-
}

# Version stamps as for the control plane: without them e2e.test reports
# v0.0.0-master.
ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=37"
	ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
deps=("$MOD/go.mod" "$MOD/go.sum" "$MOD/tools.go")
# CGO_ENABLED=0 and -trimpath as in build-controlplane.sh: the packages the two
# share are compiled once in the Go build cache.
export CGO_ENABLED=0
build specs "$MOD/go.mod" "$MOD/go.sum" "$MOD/specs/main.go" -- \
	go build -trimpath -o "$OUT/bin/specs" ./specs
build ginkgo "${deps[@]}" -- \
	go build -trimpath -ldflags "-s -w" -o "$OUT/bin/ginkgo" github.com/onsi/ginkgo/v2/ginkgo
build agnhost "${deps[@]}" -- \
	go build -trimpath -ldflags "-s -w" -o "$OUT/bin/agnhost" k8s.io/kubernetes/test/images/agnhost
build nnp "${deps[@]}" -- \
	go build -trimpath -ldflags "-s -w" -o "$OUT/bin/nnp" k8s.io/kubernetes/test/images/nonewprivs
# Upstream builds the image's program with a plain go build (no version stamps).
build sample-apiserver "${deps[@]}" -- \
	go build -trimpath -ldflags "-s -w" -o "$OUT/bin/sample-apiserver" k8s.io/sample-apiserver
build e2e.test "${deps[@]}" -- \
	go test -c -vet=off -trimpath -ldflags "-s -w $ldflags" -o "$OUT/bin/e2e.test" k8s.io/kubernetes/test/e2e
kds_log "conformance binaries are up to date in $OUT/bin"
echo "$OUT/bin"
