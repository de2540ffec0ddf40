# sqsworker — run `make help` for the targets.
SHELL := /bin/bash
GO    ?= go
PKGS  := ./...
BENCH ?= .

.PHONY: help test fmt-check vet unit demo bench fuzz

# More targets, one file per area (functions, localstack, …).
-include mk/*.mk

help: ## Show the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  make %-24s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

test: fmt-check vet unit infra-test ## Run every check and test: gofmt, go vet, go test -race, and the infra module's

fmt-check: ## Fail if gofmt would change a file
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet: ## go vet
	$(GO) vet $(PKGS)

unit: ## go test -race on every package
	$(GO) test -race -count=1 -timeout 10m $(PKGS)

# The CLI, built once into bin/ (CLI_FLAGS: without the symbol table and DWARF, as `go run` links:
# 38.1 MB instead of 53.8, a link about twice as fast; panics still print their stack); `go build -o`
# relinks nothing when the binary is up to date.
CLI       ?= bin/sqsworker
CLI_FLAGS ?= -trimpath -ldflags='-s -w'

.PHONY: cli
cli: ## Build the sqsworker CLI into bin/sqsworker (nothing to do when it is up to date)
	$(GO) build $(CLI_FLAGS) -o $(CLI) ./cmd/sqsworker

demo: cli ## Run the whole system end to end on the embedded emulator
	$(CLI) demo

bench: ## Run the benchmarks with -benchmem (BENCH=regexp to filter)
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem $(PKGS)

FUZZTIME ?= 30s
# Every fuzz target, as package:Target. `make test` runs their seed corpora as ordinary tests.
FUZZ_TARGETS := ./internal/jsonscan:FuzzSkipValue ./internal/jsonscan:FuzzString \
	./internal/sqsevent:FuzzDecode ./internal/sqsevent:FuzzDecodeSegments ./pkg/jobs:FuzzEnvelopeStringsEscape ./pkg/jobs:FuzzParseEnvelope \
	./pkg/schedule:FuzzParse ./pkg/outbox/dynamooutbox:FuzzDecodeItem

fuzz: ## Run every fuzz target for FUZZTIME each (default 30s)
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg; \
	done
