#!/usr/bin/env bash
# check.sh: the static checks (gofmt, go vet, go build) without touching the
# machine: no root, no dockerd needed. scripts/test.sh runs them too.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

kds_ensure_go
cd "$KDS_ROOT"
kds_gofmt_check
go vet ./...
# The VM smoke test is behind a build tag (a separate command: see vm-test).
go vet -tags vm ./internal/testutil/vm/
go build ./...
echo "check.sh: gofmt, vet and build passed"
