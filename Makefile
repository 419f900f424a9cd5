# sandbox-gitops: the commands a developer and CI need. Every tool comes from the Go module proxy
# through hack/tools.sh; nothing is downloaded from anywhere else.
SHELL := /usr/bin/env bash -o pipefail
export GOFLAGS += -mod=readonly
BIN := $(CURDIR)/bin
CONTROLLER_GEN := $(BIN)/controller-gen
export KUBEBUILDER_ASSETS := $(BIN)
# What the tests and the local cluster run (kwok-stages: kwok's default stages, beside it).
CLUSTER_TOOLS := etcd kube-apiserver kube-controller-manager kube-scheduler kwok kwok-stages
# What the real node runs besides (make cluster REAL_NODE=1, make e2e-node).
NODE_TOOLS := kubelet kube-proxy coredns local-path-provisioner kube-router
CLUSTER_DIR := $(CURDIR)/.cluster
NODES ?= 1

.PHONY: e2e-node e2e-dataplane e2e-upstream e2e-upstream-node bench-scale all build test test-under-load tools manifests chart golden bench fuzz lint example help cluster cluster-down images push release e2e e2e-kind

all: lint build test ## Lint, build and test.

help: ## Show the targets.
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## Build every binary into ./bin.
	go build -o $(BIN)/ ./cmd/...

tools: ## Build kube-apiserver, etcd, kustomize, controller-gen, helm, kube-controller-manager, kube-scheduler, kwok, registry, kubelet, kube-proxy, CoreDNS, local-path-provisioner, upstream's agent-sandbox-controller and sandboxd from Go modules (cached by hash); install the real node's Debian packages (containerd, runc, CNI plugins, busybox-static) when missing.
	hack/tools.sh

manifests: ## Regenerate deepcopy code, the CRDs in config/crd/bases and the RBAC of controller/ and webhook/ in config/rbac, and the chart's copies (make chart).
	@[ -x $(CONTROLLER_GEN) ] || hack/tools.sh controller-gen
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd:crdVersions=v1,maxDescLen=0 paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=sandbox-gitops-controller paths=./controller/... paths=./webhook/... output:rbac:artifacts:config=config/rbac
	@$(MAKE) --no-print-directory chart

chart: ## Regenerate the Helm chart's templates/generated (the CRDs and roles of config/).
	go test ./charts -run TestGeneratedTemplatesUpToDate -update

# TEST_TIMEOUT bounds each package's test binary. The longest, ./controller, takes about 200 s on
# an idle 2-core machine and several times that when other work keeps the cores busy (see
# test-under-load: 610 s, with make test taking 30 min in all); Go's default of 10 minutes was
# seen to expire there.
TEST_TIMEOUT ?= 40m

test: ## Run every test: unit, golden, and envtest against the real kube-apiserver and etcd.
	@for t in $(CLUSTER_TOOLS) helm registry; do [ -e $(BIN)/$$t ] || { hack/tools.sh; break; }; done
	go test -count=1 -timeout $(TEST_TIMEOUT) ./...
	# The controller benchmarks once each at a small size, so that `make bench` works as written.
	SANDBOX_BENCH_SIZES=20 SANDBOX_BENCH_STEADY=1s SANDBOX_BENCH_CLAIMS=3 go test -count=1 -timeout $(TEST_TIMEOUT) -run '^$$' -bench 'Converge|Claims' -benchtime 1x ./controller/
	# And `make bench-scale`'s three, on 3 kwok Nodes with 20 members and 10 claims.
	SANDBOX_SCALE_NODES=3 SANDBOX_SCALE_POOL=20 SANDBOX_SCALE_RATE=10 SANDBOX_SCALE_SECONDS=1 SANDBOX_SCALE_BURST=5 SANDBOX_SCALE_BURSTS=2 SANDBOX_SCALE_PAUSE=1s \
	  SANDBOX_SCALE_RATES=10 SANDBOX_SCALE_TOTAL=10 SANDBOX_SCALE_SIZES=20 go test -count=1 -timeout $(TEST_TIMEOUT) -run '^$$' -bench 'Scale' -benchtime 1x ./scale/

# LOAD_HOGS busy loops, each at most LOAD_HOG_MAX seconds, so that a hog outlives nothing even if
# make itself is killed; the trap stops them however `make test` ends.
LOAD_HOGS ?= 2
LOAD_HOG_MAX ?= 7200

test-under-load: ## `make test` while LOAD_HOGS busy loops (default 2) keep the cores busy, as a shared machine does.
	@hogs=(); \
	trap 'kill $${hogs[@]} 2>/dev/null; wait $${hogs[@]} 2>/dev/null' EXIT; \
	trap 'exit 130' INT TERM HUP; \
	for i in $$(seq $(LOAD_HOGS)); do timeout $(LOAD_HOG_MAX) bash -c 'while :; do :; done' & hogs+=($$!); done; \
	echo "test-under-load: $(LOAD_HOGS) busy loops running (pids $${hogs[*]})"; \
	start=$$SECONDS; rc=0; $(MAKE) test || rc=$$?; \
	echo "test-under-load: make test exited $$rc after $$((SECONDS - start)) s"; \
	exit $$rc

cluster: ## Start a local cluster on loopback (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok with NODES fake Nodes, default 1; SCALE=1: upstream's scale-test limits; REAL_NODE=1: one real node with containerd, kubelet, kube-proxy, CoreDNS and a volume provisioner instead, as root, IMAGES=a.tar,b.tar imported into it); state and logs in .cluster/.
	@for t in $(CLUSTER_TOOLS) $(if $(REAL_NODE),$(NODE_TOOLS)); do [ -e $(BIN)/$$t ] || { hack/tools.sh; break; }; done
	go run ./hack/cluster up -dir $(CLUSTER_DIR) -bin $(BIN) $(if $(REAL_NODE),-real-node,-nodes $(NODES)) $(if $(SCALE),-scale) $(if $(IMAGES),-images $(IMAGES))

cluster-down: ## Stop what `make cluster` started (only its processes, named by the pid files in .cluster/pids).
	go run ./hack/cluster down -dir $(CLUSTER_DIR)

golden: ## Rewrite the golden files from the current render (review the diff like code).
	go test ./golden -run 'TestGolden|TestOverlays' -update
	go test ./cmd/sandbox-router -run 'TestAgainstAPIServer/base' -update

bench: ## Run the benchmarks (figures go into the README); the scale table runs kustomize up to 1,000 members (~1 min).
	go test -run '^$$' -bench . -benchmem -cpu 1 ./render/...
	go test -run '^$$' -bench 'Function' -benchtime 3x ./cmd/sandbox-render/
	# render and the function in process on each input kind at 1k-20k items; README's table adds 200k: SANDBOX_BENCH_ITEMS=1000,10000,20000,200000 and -benchtime 1x.
	go test -run '^$$' -bench 'RenderVsFn' -benchmem -benchtime 3x -timeout 30m ./cmd/sandbox-render/
	go test -run '^$$' -bench 'BuildScale' -benchtime 1x -timeout 30m ./cmd/sandbox-render/
	go test -run '^$$' -bench 'ManyKeys' -benchtime 1x ./cmd/sandbox-render/
	go test -run '^$$' -bench 'LargeCommand' -benchmem -benchtime 1x ./cmd/sandbox-render/
	go test -run '^$$' -bench Latency -benchtime 3000x ./router/
	go test -run '^$$' -bench Throughput -benchtime 30000x ./router/
	go test -run '^$$' -bench Stream -benchtime 5x ./router/
	go test -run '^$$' -bench IdleWebSockets -benchtime 1x ./router/
	# One size per run, so each has an API server of its own (the later sizes would carry the earlier objects).
	SANDBOX_BENCH_SIZES=1000 go test -run '^$$' -bench Converge -benchtime 1x -timeout 60m ./controller/
	SANDBOX_BENCH_SIZES=2000 go test -run '^$$' -bench Converge -benchtime 1x -timeout 60m ./controller/
	SANDBOX_BENCH_SIZES=4000 go test -run '^$$' -bench Converge -benchtime 1x -timeout 60m ./controller/
	go test -run '^$$' -bench Claims -benchtime 1x -timeout 20m ./controller/

bench-scale: ## Upstream's kwok scale scenarios with a floor in the same run (SANDBOX_SCALE_CONTROLLERS=ours,upstream: upstream's own controller too, after ours), the rate this machine sustains, and convergence of 1k to 10k Sandboxes with a restart, each on a local cluster of 100 kwok Nodes (not in CI; about an hour).
	@for t in $(CLUSTER_TOOLS) agent-sandbox-controller; do [ -e $(BIN)/$$t ] || { hack/tools.sh; break; }; done
	go test -run '^$$' -bench 'ScaleClaims' -benchtime 1x -timeout 120m ./scale/
	go test -run '^$$' -bench 'ScaleThroughput' -benchtime 1x -timeout 120m ./scale/
	go test -run '^$$' -bench 'ScaleConverge' -benchtime 1x -timeout 180m ./scale/

# Each fuzz target as package:Target; their seed corpora (every repro of a crash or a wrong
# accept, and the golden inputs) run in every `make test`.
FUZZ_TARGETS := ./manifest:FuzzRead ./manifest:FuzzDecode ./bundle:FuzzExpand ./krm:FuzzRun ./router:FuzzHeaders ./api/convert:FuzzKeptAnnotations ./kbuild:FuzzOutputFileNames ./kbuild:FuzzConfigFile
FUZZTIME ?= 10m
FUZZPARALLEL ?= 1

fuzz: ## Fuzz each target for FUZZTIME (a duration, default 10m, or a count like 10000x as CI runs it) with FUZZPARALLEL workers (default 1).
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; echo "== $$fn in $$pkg for $(FUZZTIME)"; \
		go test $$pkg -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) -parallel $(FUZZPARALLEL) || exit 1; \
	done

lint: ## gofmt and go vet; fails on any finding.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needs to run on:"; echo "$$out"; exit 1; fi
	go vet ./...
	# The Go SDK's test module (hack/tools/agent-sandbox-sdk) is our code in a module of its own.
	cd hack/tools/agent-sandbox-sdk && go vet ./...

# What the images and the release say they were built from, read from git here so that
# hack/dist never looks at a repository or a clock: the commit, its time (every timestamp in the
# images: the same commit gives the same digests), and whether the tree differs from it (tracked
# changes or untracked files, which a build would compile: the version gets -dirty).
COMMIT = $(shell git rev-parse HEAD)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct)
DIRTY = $(if $(shell git status --porcelain 2>/dev/null),--dirty)
DIST = go run ./hack/dist

images: ## Build the three images (linux/amd64+arm64 indexes) into dist/images, VERSION=vX.Y.Z (default v0.0.0-dev).
	$(DIST) images --version "$(or $(VERSION),v0.0.0-dev)" --commit $(COMMIT) --source-date-epoch $(SOURCE_DATE_EPOCH) $(DIRTY)

push: ## Push dist/images to REGISTRY=host/path (credentials from ~/.docker/config.json) and print the digests.
	@[ -n "$(REGISTRY)" ] || { echo "make push: set REGISTRY=host/path, e.g. make push REGISTRY=ghcr.io/you" >&2; exit 2; }
	$(DIST) push --registry $(REGISTRY)

release: ## Build the images and dist/install.yaml, router.yaml, argocd-cmp.yaml, the Helm chart sandbox-gitops-X.Y.Z.tgz and SHA256SUMS for VERSION=vX.Y.Z, pinned by digest.
	$(DIST) release --version "$(VERSION)" --commit $(COMMIT) --source-date-epoch $(SOURCE_DATE_EPOCH) $(DIRTY) $(if $(REGISTRY),--registry $(REGISTRY))

# The version the e2e targets release under: a pre-release of nothing, so it never passes for a
# real one.
E2E_VERSION := v0.0.0-e2e

e2e: ## Release (VERSION v0.0.0-e2e) and install it on a local cluster: the controller runs locally as install.yaml's ServiceAccount (about 3 min).
	@for t in $(CLUSTER_TOOLS); do [ -e $(BIN)/$$t ] || { hack/tools.sh; break; }; done
	@$(MAKE) --no-print-directory release VERSION=$(E2E_VERSION)
	SANDBOX_E2E_DIST=$(CURDIR)/dist go test -count=1 -timeout 20m -v -parallel 4 -run '^(TestInstall|TestStartupTakeover)$$' ./e2e/

e2e-node: ## Release (VERSION v0.0.0-e2e) and install it on a local cluster with a real node (containerd, kubelet, kube-proxy, kube-router, CoreDNS, local-path; as root): the controller, webhook and router run from their images, sandboxes as real Pods; then the README's real-node section as written (about 8 min).
	@for t in $(CLUSTER_TOOLS) $(NODE_TOOLS) helm; do [ -e $(BIN)/$$t ] || { hack/tools.sh; break; }; done
	@$(MAKE) --no-print-directory release VERSION=$(E2E_VERSION)
	SANDBOX_REAL_NODE=1 go test -count=1 -timeout 10m -v -run '^TestRealNode(Down)?$$' ./internal/cluster/
	SANDBOX_REAL_NODE=1 SANDBOX_E2E_DIST=$(CURDIR)/dist go test -count=1 -timeout 20m -v -run '^TestInstallRealNode$$' ./e2e/
	SANDBOX_REAL_NODE=1 go test -count=1 -timeout 10m -v -run '^TestRealNodeSection$$' ./docs/

e2e-dataplane: ## The dataplane table: every NetworkPolicy the controller renders, enforced by kube-router on the real node, connection by connection from inside Pods, with controls (as root; about 3 min).
	@for t in $(CLUSTER_TOOLS) $(NODE_TOOLS); do [ -e $(BIN)/$$t ] || { hack/tools.sh; break; }; done
	@$(MAKE) --no-print-directory release VERSION=$(E2E_VERSION)
	SANDBOX_REAL_NODE=1 SANDBOX_E2E_DIST=$(CURDIR)/dist go test -count=1 -timeout 20m -v -run '^TestDataplane$$' ./e2e/

# kind needs a container engine that answers; without one the target says so in one line and
# succeeds, before building anything (the test itself skips the same way when run directly).
e2e-kind: ## The e2e on a kind cluster, with the controller and router running in it from the release's images (needs Docker, Podman or nerdctl).
	@engine=; for e in docker podman nerdctl; do command -v $$e >/dev/null && $$e info >/dev/null 2>&1 && { engine=$$e; break; }; done; \
	if [ -z "$$engine" ]; then echo "e2e-kind: skipped: no container engine answers here (docker, podman or nerdctl info), and kind runs its nodes in one"; exit 0; fi; \
	$(MAKE) --no-print-directory release VERSION=$(E2E_VERSION) && \
	SANDBOX_E2E_DIST=$(CURDIR)/dist SANDBOX_E2E_KIND=1 go test -count=1 -timeout 30m -v -run '^TestInstallKind$$' ./e2e/

# Upstream agent-sandbox's own e2e suite (test/e2e and test/e2e/extensions of the version
# hack/tools/agent-sandbox-e2e requires, compiled once by hack/tools.sh and cached like the
# tools) against the controller built from this tree. RUN=regexp runs only the top-level tests it
# matches. The tests that cannot run here are listed, with why, in e2e/upstream/list.go.
E2E_UPSTREAM_OUT := $(CURDIR)/.e2e-upstream

e2e-upstream: ## Upstream agent-sandbox v1.0.1's own e2e suite against this controller on a local cluster; fails on any FAIL or unlisted skip; the table of every test in .e2e-upstream/results.md (about 10 min; RUN=regexp for some).
	@for t in $(CLUSTER_TOOLS); do [ -e $(BIN)/$$t ] || { hack/tools.sh; break; }; done
	hack/tools.sh agent-sandbox-e2e.test agent-sandbox-e2e-extensions.test
	SANDBOX_UPSTREAM_E2E=$(BIN) SANDBOX_UPSTREAM_E2E_OUT=$(E2E_UPSTREAM_OUT) SANDBOX_UPSTREAM_E2E_RUN='$(RUN)' \
	  go test -count=1 -timeout 90m -v -run '^TestUpstreamE2E$$' ./e2e/

# What of upstream needs a process in the sandbox's Pod, on the real node: upstream's tests of
# e2e/upstream's RealNode list (TestRunSandboxdSandbox), its Go SDK (hack/tools/agent-sandbox-sdk)
# and its Python SDK's K8sHelper path, against the release running from its images. A target of
# its own rather than a mode of e2e-upstream: that one runs the whole suite in minutes on kwok
# without root; this one needs root and the one real node a machine may run at a time, and runs
# only what kwok cannot.
e2e-upstream-node: ## Upstream's sandboxd test (kubectl port-forward), its Go SDK and its Python SDK (K8sHelper) against the release on a real node, with upstream's sandboxd image built from make tools' sandboxd and busybox; prints each SDK step's latency (as root; about 5 min).
	@for t in $(CLUSTER_TOOLS) $(NODE_TOOLS) sandboxd; do [ -e $(BIN)/$$t ] || { hack/tools.sh; break; }; done
	hack/tools.sh agent-sandbox-e2e-extensions.test
	@$(MAKE) --no-print-directory release VERSION=$(E2E_VERSION)
	SANDBOX_REAL_NODE=1 SANDBOX_E2E_DIST=$(CURDIR)/dist SANDBOX_UPSTREAM_E2E=$(BIN) SANDBOX_UPSTREAM_E2E_OUT=$(E2E_UPSTREAM_OUT) \
	  go test -count=1 -timeout 30m -v -run '^TestUpstreamRealNode$$' ./e2e/

example: ## Render the example tree docs/example (what the README's first commands do).
	go run ./cmd/sandbox-render render docs/example
