#!/usr/bin/env bash
# bench.sh: run the benchmarks of internal/... with the same machine set-up and
# DOCKERSHIM_TEST_* environment as scripts/test.sh. Run as root.
#
# Env: BENCHTIME  go test -benchtime (default 1s; e.g. 100x)
#      BENCH      go test -bench regexp (default .)
#      PKGS       packages (default ./internal/...)
#      CHURN_CYCLES  pod create/delete cycles of BenchmarkChurn (default 1000):
#                 BENCH=Churn CHURN_CYCLES=1000 PKGS=./internal/e2e ./scripts/bench.sh
#      BURST_PODS    BenchmarkBurst: static pods written at once into a node's
#                 manifest dir (default 30), timed to their container's Docker
#                 StartedAt, against the floor: as many pause+busybox pairs
#                 started straight through Docker's API with the same CNI ADD
#      BURST_ROUNDS  interleaved kubelet/floor rounds; medians are reported
#                 (default 1; compare medians of 3 or more: single runs vary
#                 by about +-12 % on 2 cores)
#      BURST_IDLE    the kubelet's idle window after the burst (default 60s)
#      BURST_V       the kubelet's -v in BenchmarkBurst (default 0, the kubelet's
#                 default; the tests run it at 4)
#      BURST_PROFILE_DIR  a directory for the kubelet's profiles of each round:
#                 CPU over the burst's first 20 s and over the idle window, heap
#                 at the end of the idle window (go tool pprof -sample_index=inuse_space)
#                 BENCH=Burst BURST_PODS=100 BURST_ROUNDS=3 PKGS=./internal/e2e ./scripts/bench.sh -v
#                 (-v: go test keeps only 10 lines of a benchmark's log
#                 otherwise, and BenchmarkBurst logs a table per round)
# Extra arguments are passed to go test.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

kds_require_root "$@"
kds_test_env_up
cd "$KDS_ROOT"
# shellcheck disable=SC2086 # PKGS is a word list
go test -count=1 -p 1 -timeout 60m -run '^$' -bench "${BENCH:-.}" -benchtime "${BENCHTIME:-1s}" -benchmem \
	"$@" ${PKGS:-./internal/...}
