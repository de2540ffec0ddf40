// Package e2e is the end-to-end throughput benchmark, `make bench-e2e`: the emulator as a
// separate server process (internal/testenv/kumoserve), the same preloaded queue of N job envelopes for
// every scenario, and, interleaved and repeated, a raw aws-sdk-go-v2 receive/delete loop, a raw
// idempotent floor (per message one conditional PutItem and one UpdateItem of 3 attributes), the
// poller with the worker, and the poller with the worker and the DynamoDB idempotency middleware,
// each at 1 and 4 concurrent batches. It prints jobs/s, client and emulator CPU per job, AWS calls
// and DynamoDB write units per job, and the ratios to the raw scenarios of the same round.
//
// The benchmark itself is behind the build tag benche2e (bench_test.go), so that `make test`
// does not run it; this file and the CPU and statistics helpers are built and tested always.
// See docs/BENCHMARKS.md for the numbers and how to read them.
package e2e
