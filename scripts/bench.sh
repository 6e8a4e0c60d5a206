#!/usr/bin/env bash
# bench.sh: run the benchmarks of internal/... with the same machine set-up and
# DOCKERSHIM_TEST_* environment as scripts/test.sh. Run as root.
#
# Env: BENCHTIME  go test -benchtime (default 1s; e.g. 100x)
#      BENCH      go test -bench regexp (default .)
#      PKGS       packages (default ./internal/...)
#      CHURN_CYCLES  pod create/delete cycles of BenchmarkChurn (default 1000):
#                 BENCH=Churn CHURN_CYCLES=1000 PKGS=./internal/e2e ./scripts/bench.sh
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
