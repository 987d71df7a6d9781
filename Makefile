GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS        := ./...
# Nested modules with their own go.mod (./... of the main module skips them).
# bench/peerbench is left to make peerbench: it measures, it does not test.
MODULES     := algorithms/redisstore/rueidisclient middleware/grpclimit middleware/prometheus middleware/otel middleware/ginlimit middleware/admin/browser example/echo

.PHONY: test lint fmt vet tidy deps bench fuzz chaos

## test: formatting, vet, the dependency rule, then every test with the race detector (real redis-server included),
## then the nested modules' (gRPC interceptors, metrics adapters, the Gin adapter, the Echo example: each its own go.mod)
## A Redis Cluster the harness had to start again (internal/redistest, RetriesEnv) is reported at the end.
RETRIES := $(CURDIR)/.redistest-retries.log
test: fmt vet deps
	@rm -f $(RETRIES)
	REDISTEST_RETRIES=$(RETRIES) $(GO) test -race -shuffle=on -count=1 -timeout 10m $(PKGS)
	for m in $(MODULES); do (cd $$m && REDISTEST_RETRIES=$(RETRIES) $(GO) test -race -count=1 ./...) || exit 1; done
	@if [ -s $(RETRIES) ]; then echo "clusters internal/redistest started again (a first attempt did not form):"; cat $(RETRIES); fi

## lint: gofmt, go vet, go.mod tidy, and staticcheck, in the module and in the nested modules
lint: fmt vet tidy
	$(GO) run $(STATICCHECK) $(PKGS)
	for m in $(MODULES); do (cd $$m && $(GO) run $(STATICCHECK) ./...) || exit 1; done

fmt:
	@out=$$(gofmt -l . | grep -v '^testdata/' || true); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)
	for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

## deps: fail when a package that needs no Redis compiles go-redis or the Lua scripts
## (only algorithms/redisstore may import them; see docs/architecture.md), nor the nested modules
## (but rueidisclient, which adapts rueidis to the store's go-redis interfaces)
NOREDIS := ./algorithms ./algorithms/memstore ./algorithms/denycache ./keyfunc ./headers ./middleware/...
deps:
	@out=$$($(GO) list -deps $(NOREDIS) | grep -e '^github.com/redis/go-redis' -e '^github.com/redlimit/redlimit/lua$$' || true); \
	if [ -n "$$out" ]; then echo "packages of $(NOREDIS) must not depend on:"; echo "$$out"; exit 1; fi
	@for m in $(filter-out algorithms/redisstore/rueidisclient,$(MODULES)); do \
	  out=$$(cd $$m && $(GO) list -deps . | grep -e '^github.com/redis/go-redis' -e '^github.com/redlimit/redlimit/lua$$' || true); \
	  if [ -n "$$out" ]; then echo "the package of $$m must not depend on:"; echo "$$out"; exit 1; fi; \
	done

## tidy: fail when a go.mod or go.sum (the main module's, the nested modules') is not what go mod tidy would write
tidy:
	$(GO) mod tidy -diff
	for m in $(MODULES); do (cd $$m && $(GO) mod tidy -diff) || exit 1; done

## bench: every benchmark, once, with allocations
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 $(PKGS)

## fuzz: a short run of each fuzz target
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzIP -fuzztime 300000x ./keyfunc
	$(GO) test -run '^$$' -fuzz FuzzSanitize -fuzztime 300000x ./keyfunc

## leasebench: quota blocks (engine.Rule.Blocks) against a bare EVALSHA and against no blocks, and their
## exactness over 120 windows of 500ms, on a fresh redis-server (a few minutes at most; flags via LEASEBENCH_FLAGS)
.PHONY: leasebench
leasebench:
	$(GO) run ./bench/leasebench $(LEASEBENCH_FLAGS)

## peerbench: redlimit against redis_rate, ulule/limiter and throttled on a fresh redis-server
## (nested module with its own go.mod), then the quota leasing run of leasebench on it;
## flags via PEERBENCH_FLAGS="-duration 3s -rounds 5"
.PHONY: peerbench
peerbench:
	cd bench/peerbench && $(GO) run . $(PEERBENCH_FLAGS)

## peerbench-same: only the same-algorithm comparison (redlimit's fixed window beside ulule/limiter's,
## its GCRA beside redis_rate's, every cell a ratio to the bare EVALSHA of the same round)
.PHONY: peerbench-same
peerbench-same:
	cd bench/peerbench && $(GO) run . -same $(PEERBENCH_FLAGS)

## script-instructions: the Redis instructions per check of the same-algorithm contenders, counted
## on a redis-server run under valgrind's callgrind (about a minute; needs valgrind): counts that
## repeat on any machine, where timings on a shared one do not
.PHONY: script-instructions
script-instructions:
	cd bench/peerbench && $(GO) run . -same -rounds 0 -instructions 3000 -lease-windows 0

## chaos: the fault-schedule harness's long mode (cmd/chaos, docs/reliability.md): seeded runs against
## topologies it starts on 127.0.0.1; the last line counts violations, and it exits 1 when there are any.
## The short mode runs inside make test (TestShort in internal/chaos).
TOPOLOGY ?= all
DURATION ?= 60s
RUNS     ?= 100
SEED     ?= 1
MUTATE   ?=
chaos:
	$(GO) build -o cmd/chaos/chaos ./cmd/chaos
	./cmd/chaos/chaos -topology $(TOPOLOGY) -duration $(DURATION) -runs $(RUNS) -seed $(SEED) -mutate '$(MUTATE)' $(CHAOS_FLAGS)
