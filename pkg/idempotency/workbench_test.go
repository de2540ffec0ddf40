package idempotency_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// BenchmarkMiddlewareWork is the middleware's own cost per job, on the memory store (no network):
// claim, run a no-op job, finish; under a deadline (Lambda) and without one (a container, with
// its lease renewal goroutine).
//
//	go test -run '^$' -bench MiddlewareWork -benchmem ./pkg/idempotency/
func BenchmarkMiddlewareWork(b *testing.B) {
	for _, mode := range []string{"lambda", "container"} {
		b.Run(mode, func(b *testing.B) {
			mw, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: idempotency.NewMemoryStore()})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if mode == "lambda" {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Hour)
				defer cancel()
			}
			next := func(context.Context) error { return nil }
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				id := "job-" + strconv.Itoa(i)
				info := &jobs.Info{ID: id, Kind: "report.build", Key: id, RawArgs: []byte(`{"month":"2026-11"}`), MaxAttempts: 5, ReceiveCount: 1}
				if err := mw.Work(ctx, info, next); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
