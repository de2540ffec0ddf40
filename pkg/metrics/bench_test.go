package metrics

import (
	"context"
	"testing"
	"time"
)

// BenchmarkObserveBatch measures a batch of 10 over two kinds (two documents).
func BenchmarkObserveBatch(b *testing.B) {
	r, err := New(Config{Writer: discard{}, Queue: "jobs", Now: func() time.Time { return clock }})
	if err != nil {
		b.Fatal(err)
	}
	batch := mixedBatch()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r.ObserveBatch(ctx, batch)
	}
}

// BenchmarkObserveBatchLarge measures a batch of 250 of one kind (three documents).
func BenchmarkObserveBatchLarge(b *testing.B) {
	r, err := New(Config{Writer: discard{}, Queue: "jobs", Now: func() time.Time { return clock }})
	if err != nil {
		b.Fatal(err)
	}
	batch := bigBatch()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r.ObserveBatch(ctx, batch)
	}
}
