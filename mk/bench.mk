# The end-to-end benchmark (bench/e2e, build tag benche2e; not part of `make test`). It runs the
# emulator as its own process through internal/kumoserve: kumo's own `kumo serve` when one of the
# version go.mod requires is found (KUMO_BIN, PATH, GOBIN), otherwise this module's kumod.
# BENCH_E2E_N jobs per run (5000), BENCH_E2E_ROUNDS rounds (3), BENCH_E2E_PROFILE=dir for CPU
# profiles of both processes in the last round, BENCH_E2E_ONLY=regexp on "scenario/batches".

.PHONY: bench-e2e

bench-e2e: ## End-to-end throughput and cost per job against the emulator as a server (minutes)
	$(GO) test -tags benche2e -run '^TestBenchE2E$$' -count=1 -v -timeout 90m ./bench/e2e
