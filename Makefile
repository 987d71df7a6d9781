GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS        := ./...

.PHONY: test lint fmt vet bench fuzz

## test: formatting, vet, then every test with the race detector (real redis-server included)
test: fmt vet
	$(GO) test -race -shuffle=on -count=1 -timeout 10m $(PKGS)

## lint: gofmt, go vet and staticcheck
lint: fmt vet
	$(GO) run $(STATICCHECK) $(PKGS)

fmt:
	@out=$$(gofmt -l . | grep -v '^testdata/' || true); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

## bench: every benchmark, once, with allocations
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 $(PKGS)

## fuzz: a short run of each fuzz target
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzIP -fuzztime 30s ./keyfunc
	$(GO) test -run '^$$' -fuzz FuzzSanitize -fuzztime 30s ./keyfunc
