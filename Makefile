GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS        := ./...
# The repository's modules (docs/architecture.md, "Modules and releases"):
# - the root module, tested alone (GOWORK=off): exactly the go.mod a consumer gets;
# - NESTED, the nested modules a consumer installs: every module go.work uses but the
#   root. Each requires the root module at the version released with it and builds
#   against the working tree through the workspace;
# - LOCALMODS, modules nobody installs, outside the workspace and built alone: the
#   admin page's browser test (a replace of the root) and the release tooling.
# bench/peerbench (also outside the workspace) is left to make peerbench: it measures.
NESTED      := $(shell GOWORK=$(CURDIR)/go.work $(GO) work edit -json | sed -n 's,.*"DiskPath": "\./\(.*\)".*,\1,p')
LOCALMODS   := middleware/admin/browser internal/release
ROOT        := GOWORK=off
VERSION     ?=
RELEASE     := cd internal/release && GOWORK=off $(GO) run . 

.PHONY: test unit lint apicount fmt vet tidy tidy-write deps bench fuzz chaos release-check release release-record release-prepare

## test: formatting, vet, the dependency rule, then every test with the race detector (real redis-server included),
## then the nested modules' (rueidis store, gRPC interceptors, metrics adapters, frameworks: each its own go.mod)
## and the local modules' (browser test, release tooling).
## A Redis Cluster the harness had to start again (internal/redistest, RetriesEnv) is reported at the end.
RETRIES := $(CURDIR)/.redistest-retries.log
test: fmt vet deps
	@rm -f $(RETRIES)
	$(ROOT) REDISTEST_RETRIES=$(RETRIES) $(GO) test -race -shuffle=on -count=1 -timeout 10m $(PKGS)
	for m in $(NESTED); do (cd $$m && REDISTEST_RETRIES=$(RETRIES) $(GO) test -race -count=1 ./...) || exit 1; done
	for m in $(LOCALMODS); do (cd $$m && GOWORK=off REDISTEST_RETRIES=$(RETRIES) $(GO) test -race -count=1 ./...) || exit 1; done
	@if [ -s $(RETRIES) ]; then echo "clusters internal/redistest started again (a first attempt did not form):"; cat $(RETRIES); fi

## unit: every module's tests once, without the race detector (what .ci/run runs on the next Go release:
## GOTOOLCHAIN=go1.27.3 make unit)
unit:
	$(GO) version
	$(ROOT) $(GO) test -count=1 -timeout 10m $(PKGS)
	for m in $(NESTED); do (cd $$m && $(GO) test -count=1 ./...) || exit 1; done
	for m in $(LOCALMODS); do (cd $$m && GOWORK=off $(GO) test -count=1 ./...) || exit 1; done

## lint: gofmt, go vet, go.mod tidy, and staticcheck, in every module; then the size of the
## public API (internal/apicount: exported identifiers, exported fields and interface methods)
lint: fmt vet tidy apicount
	$(ROOT) $(GO) run $(STATICCHECK) $(PKGS)
	for m in $(NESTED); do (cd $$m && $(GO) run $(STATICCHECK) ./...) || exit 1; done
	for m in $(LOCALMODS); do (cd $$m && GOWORK=off $(GO) run $(STATICCHECK) ./...) || exit 1; done

## apicount: the exported API of the main module's importable packages, per package and in all
## (the v1 budget: APIBUDGET, "-ids 140 -fields 100"; 0 turns a budget off)
APIBUDGET ?= -ids 0 -fields 0
apicount:
	$(ROOT) $(GO) run ./internal/apicount $(APIBUDGET)

fmt:
	@out=$$(gofmt -l . | grep -v '^testdata/' || true); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(ROOT) $(GO) vet $(PKGS)
	for m in $(NESTED); do (cd $$m && $(GO) vet ./...) || exit 1; done
	for m in $(LOCALMODS); do (cd $$m && GOWORK=off $(GO) vet ./...) || exit 1; done

## deps: fail when a package that needs no Redis compiles go-redis or the Lua scripts
## (only algorithms/redisstore may import them; see docs/architecture.md), nor the nested modules
## (but rueidisclient, which adapts rueidis to the store's go-redis interfaces)
NOREDIS := . ./algorithms ./algorithms/memstore ./algorithms/denycache ./keyfunc ./headers ./middleware/...
deps:
	@out=$$($(ROOT) $(GO) list -deps $(NOREDIS) | grep -e '^github.com/redis/go-redis' -e '^github.com/redlimit/redlimit/lua$$' || true); \
	if [ -n "$$out" ]; then echo "packages of $(NOREDIS) must not depend on:"; echo "$$out"; exit 1; fi
	@for m in $(filter-out algorithms/redisstore/rueidisclient,$(NESTED)) middleware/admin/browser; do \
	  out=$$(cd $$m && GOWORK=$$([ $$m = middleware/admin/browser ] && echo off) $(GO) list -deps . | grep -e '^github.com/redis/go-redis' -e '^github.com/redlimit/redlimit/lua$$' || true); \
	  if [ -n "$$out" ]; then echo "the package of $$m must not depend on:"; echo "$$out"; exit 1; fi; \
	done

## tidy: fail when a go.mod or go.sum is not what go mod tidy would write: the root's and the local modules'
## as they are; the nested modules' against a module proxy built from the working tree (go mod tidy
## ignores go.work, and the root version they require is published only at its release)
tidy:
	$(ROOT) $(GO) mod tidy -diff
	for m in $(LOCALMODS) bench/peerbench; do (cd $$m && GOWORK=off $(GO) mod tidy -diff) || exit 1; done
	$(RELEASE) tidy

## tidy-write: rewrite the nested modules' go.mod and go.sum as make tidy wants them
tidy-write:
	$(RELEASE) tidy -write

## release-check: the proof that VERSION (default: CHANGELOG.md's newest section) installs as a consumer gets it:
## a file module proxy built from the working tree, every module go get-ed and run by a fresh consumer
## (no replace, no workspace), the API diff against the previous release (api/), the state test across releases
release-check:
	$(RELEASE) check $(if $(VERSION),-version $(VERSION))

## release: print the tags of every module for VERSION (CREATE=1 creates them), after checking the release is
## recorded (make release-record) and dated in CHANGELOG.md; docs/releasing.md is the procedure
release:
	@[ -n "$(VERSION)" ] || { echo "make release VERSION=vX.Y.Z"; exit 2; }
	$(RELEASE) tags -version $(VERSION) $(if $(CREATE),-create)

## release-record: record VERSION in the repository: api/VERSION.txt and the state fixture of its scripts
release-record:
	@[ -n "$(VERSION)" ] || { echo "make release-record VERSION=vX.Y.Z"; exit 2; }
	$(RELEASE) record -version $(VERSION)

## release-prepare: point the nested modules (and go.work) at root VERSION, the next release's
release-prepare:
	@[ -n "$(VERSION)" ] || { echo "make release-prepare VERSION=vX.Y.Z"; exit 2; }
	$(RELEASE) prepare -version $(VERSION)

## bench: every benchmark, once, with allocations
bench:
	$(ROOT) $(GO) test -run '^$$' -bench . -benchmem -count=1 $(PKGS)

## fuzz: a short run of each fuzz target
fuzz:
	$(ROOT) $(GO) test -run '^$$' -fuzz FuzzIP -fuzztime 300000x ./keyfunc
	$(ROOT) $(GO) test -run '^$$' -fuzz FuzzSanitize -fuzztime 300000x ./keyfunc

## leasebench: quota blocks (redlimit.Rule.Blocks) against a bare EVALSHA and against no blocks, and their
## exactness over 120 windows of 500ms, on a fresh redis-server (a few minutes at most; flags via LEASEBENCH_FLAGS)
.PHONY: leasebench
leasebench:
	$(ROOT) $(GO) run ./bench/leasebench $(LEASEBENCH_FLAGS)

## peerbench: redlimit against redis_rate, ulule/limiter and throttled on a fresh redis-server
## (nested module with its own go.mod), then the quota leasing run of leasebench on it;
## flags via PEERBENCH_FLAGS="-duration 3s -rounds 5"
.PHONY: peerbench
peerbench:
	cd bench/peerbench && GOWORK=off $(GO) run . $(PEERBENCH_FLAGS)

## peerbench-same: only the same-algorithm comparison (redlimit's fixed window beside ulule/limiter's,
## its GCRA beside redis_rate's, every cell a ratio to the bare EVALSHA of the same round)
.PHONY: peerbench-same
peerbench-same:
	cd bench/peerbench && GOWORK=off $(GO) run . -same $(PEERBENCH_FLAGS)

## script-instructions: the Redis instructions per check of the same-algorithm contenders, counted
## on a redis-server run under valgrind's callgrind (about a minute; needs valgrind): counts that
## repeat on any machine, where timings on a shared one do not
.PHONY: script-instructions
script-instructions:
	cd bench/peerbench && GOWORK=off $(GO) run . -same -rounds 0 -instructions 3000 -lease-windows 0

## chaos: the fault-schedule harness's long mode (cmd/chaos, docs/reliability.md): seeded runs against
## topologies it starts on 127.0.0.1; the last line counts violations, and it exits 1 when there are any.
## The short mode runs inside make test (TestShort in internal/chaos).
TOPOLOGY ?= all
DURATION ?= 60s
RUNS     ?= 100
SEED     ?= 1
MUTATE   ?=
chaos:
	$(ROOT) $(GO) build -o cmd/chaos/chaos ./cmd/chaos
	./cmd/chaos/chaos -topology $(TOPOLOGY) -duration $(DURATION) -runs $(RUNS) -seed $(SEED) -mutate '$(MUTATE)' $(CHAOS_FLAGS)
