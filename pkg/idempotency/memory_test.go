package idempotency_test

import (
	"context"
	"testing"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/idempotency/idempotencytest"
)

func TestMemoryStoreConformance(t *testing.T) {
	t.Parallel()
	idempotencytest.RunWithOptions(t,
		func(*testing.T) idempotency.Store { return idempotency.NewMemoryStore() },
		idempotencytest.Options{Seed: func(t *testing.T, s idempotency.Store, r idempotency.Record) {
			t.Helper()
			if err := s.(*idempotency.MemoryStore).Put(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		}})
}

func TestMemoryStoreHonoursContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := idempotency.NewMemoryStore()
	if _, err := s.Claim(ctx, idempotency.ClaimRequest{Kind: "k", Key: "a", Token: "t"}); err != context.Canceled {
		t.Errorf("Claim with a cancelled context = %v, want context.Canceled", err)
	}
	if _, err := s.Get(ctx, "k", "a"); err != context.Canceled {
		t.Errorf("Get with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestMemoryStorePutValidates(t *testing.T) {
	t.Parallel()
	s := idempotency.NewMemoryStore()
	for _, r := range []idempotency.Record{
		{Key: "a", State: idempotency.StateQueued},
		{Kind: "k", State: idempotency.StateQueued},
		{Kind: "k", Key: "a", State: "bogus"},
	} {
		if err := s.Put(context.Background(), r); err == nil {
			t.Errorf("Put(%+v) accepted", r)
		}
	}
}
