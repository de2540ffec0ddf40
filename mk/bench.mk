# The end-to-end benchmark (bench/e2e, build tag benche2e; not part of `make test`): the emulator
# as its own process through internal/testenv/kumoserve, preloaded queues, raw SDK loops against our
# poller, worker and idempotency store (docs/BENCHMARKS.md). The emulator is kumo's own server,
# `kumo serve`: $KUMO_BIN when set, else a build of kumo's cmd/kumo (the version go.mod requires)
# cached under ~/.cache/sqsworker, made here on the first run (minutes on a fresh machine). If that
# build fails, kumoserve falls back to this module's kumod, which reaches the same server through
# awslocal's loopback reverse proxy (more emulator CPU per call; the ratios still compare like with like).
#
#   BENCH_E2E_N=5000        jobs per run
#   BENCH_E2E_ROUNDS=3      rounds of every scenario, interleaved
#   BENCH_E2E_COST_N=500    jobs of the untimed write-unit pass
#   BENCH_E2E_PROFILE=dir   CPU profiles of both processes in the last round
#   BENCH_E2E_ONLY=regexp   on "scenario/batches", e.g. '^(floor|idem)/4$'

.PHONY: bench-e2e

KUMO_VERSION = $(shell $(GO) list -m -f '{{.Version}}' github.com/sivchari/kumo)
KUMO_CACHED = $(HOME)/.cache/sqsworker/kumo-$(KUMO_VERSION)/kumo

bench-e2e: ## End-to-end jobs/s, CPU and DynamoDB write units per job, raw SDK vs ours (minutes)
	@if [ -z "$$KUMO_BIN" ] && [ ! -x "$(KUMO_CACHED)" ]; then \
		echo "bench-e2e: building kumo $(KUMO_VERSION)'s server into $(KUMO_CACHED) (once; minutes on a fresh machine)"; \
		dir=$$($(GO) mod download -json github.com/sivchari/kumo | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
		mkdir -p "$(dir $(KUMO_CACHED))" && (cd "$$dir" && GOWORK=off GOFLAGS=-mod=readonly \
			GONOSUMDB='github.com/aws/aws-sdk-go-v2/service/*' $(GO) build -o "$(KUMO_CACHED).tmp" ./cmd/kumo) && \
			mv "$(KUMO_CACHED).tmp" "$(KUMO_CACHED)" || echo "bench-e2e: could not build it; the benchmark runs kumod instead"; \
	fi
	KUMO_BIN="$${KUMO_BIN:-$$([ -x "$(KUMO_CACHED)" ] && echo "$(KUMO_CACHED)")}" \
		$(GO) test -tags benche2e -run '^TestBenchE2E$$' -count=1 -v -timeout 90m ./bench/e2e
