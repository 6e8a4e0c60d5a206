# Thin wrapper: the logic lives in scripts/. `make` lists the targets.
GO ?= go

.DEFAULT_GOAL := help
.PHONY: help build test bench images node-image vm-test check conformance clean

help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## Build bin/kubelet
	$(GO) build -trimpath -o bin/kubelet .

test: ## Prepare the machine and run every test (root; scripts/test.sh)
	./scripts/test.sh

bench: ## Run the benchmarks of internal/... (root; scripts/bench.sh)
	./scripts/bench.sh

images: ## Build the local pause and busybox images (scripts/build-images.sh)
	./scripts/build-images.sh

node-image: ## Build the node container image, systemd + dockerd on Debian 12 (root; scripts/node-image.sh)
	./scripts/node-image.sh

vm-test: ## Build or reuse the Debian 13 cgroup v2 VM image; run its smoke test, a node joined to a control plane in it on each Docker cgroup driver and the NFS volume test, about 20 min (root; scripts/vm.sh)
	./scripts/vm.sh image
	$(GO) test -tags vm -count=1 -v -run TestIntegrationVM ./internal/testutil/vm/
	$(GO) test -tags vm -count=1 -v -timeout 40m -run 'TestIntegrationVMNode|TestIntegrationVMNFS' ./internal/e2e/

check: ## gofmt, go vet and go build, without touching the machine
	./scripts/check.sh

conformance: ## Run upstream's [NodeConformance] e2e specs against bin/kubelet (root; scripts/conformance.sh)
	./scripts/conformance.sh

clean: ## Remove build outputs
	rm -rf bin/
