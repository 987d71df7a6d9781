GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS        := ./...
GRPC        := middleware/grpclimit

.PHONY: test lint fmt vet tidy deps bench fuzz

## test: formatting, vet, the dependency rule, then every test with the race detector (real redis-server included),
## then the gRPC interceptors' nested module (middleware/grpclimit, its own go.mod)
test: fmt vet deps
	$(GO) test -race -shuffle=on -count=1 -timeout 10m $(PKGS)
	cd $(GRPC) && $(GO) test -race -shuffle=on -count=1 -timeout 5m ./...

## lint: gofmt, go vet, go.mod tidy, and staticcheck, in the module and in the nested gRPC module
lint: fmt vet tidy
	$(GO) run $(STATICCHECK) $(PKGS)
	cd $(GRPC) && $(GO) run $(STATICCHECK) ./...

fmt:
	@out=$$(gofmt -l . | grep -v '^testdata/' || true); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)
	cd $(GRPC) && $(GO) vet ./...

## deps: fail when a package that needs no Redis compiles go-redis or the Lua scripts
## (only algorithms/redisstore may import them; see docs/architecture.md)
NOREDIS := ./algorithms ./algorithms/memstore ./algorithms/denycache ./keyfunc ./headers ./middleware/...
deps:
	@out=$$($(GO) list -deps $(NOREDIS) | grep -e '^github.com/redis/go-redis' -e '^github.com/redlimit/redlimit/lua$$' || true); \
	if [ -n "$$out" ]; then echo "packages of $(NOREDIS) must not depend on:"; echo "$$out"; exit 1; fi
	@out=$$(cd $(GRPC) && $(GO) list -deps . | grep -e '^github.com/redis/go-redis' -e '^github.com/redlimit/redlimit/lua$$' || true); \
	if [ -n "$$out" ]; then echo "$(GRPC) must not depend on:"; echo "$$out"; exit 1; fi

## tidy: fail when go.mod or go.sum (the module's or the gRPC module's) is not what go mod tidy would write
tidy:
	$(GO) mod tidy -diff
	cd $(GRPC) && $(GO) mod tidy -diff

## bench: every benchmark, once, with allocations
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 $(PKGS)

## fuzz: a short run of each fuzz target
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzIP -fuzztime 300000x ./keyfunc
	$(GO) test -run '^$$' -fuzz FuzzSanitize -fuzztime 300000x ./keyfunc

## peerbench: redlimit against redis_rate, ulule/limiter and throttled on a fresh redis-server
## (nested module with its own go.mod); flags via PEERBENCH_FLAGS="-duration 3s -rounds 5"
.PHONY: peerbench
peerbench:
	cd example/peerbench && $(GO) run . $(PEERBENCH_FLAGS)
