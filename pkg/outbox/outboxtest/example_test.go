package outboxtest_test

import (
	"context"
	"testing"

	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/outboxtest"
)

// Run the suite from a test of your store's package: each call of newHarness returns a store of
// its own (a fresh table, schema or key prefix), since a claim takes whatever is due. Insert
// writes entries as your enqueue path commits them. Here the store is pkg/outbox's MemoryStore,
// which pkg/outbox checks this way; the DynamoDB and PostgreSQL stores run the same suite.
func ExampleRun() {
	newHarness := func(t *testing.T) outboxtest.Harness {
		s := outbox.NewMemoryStore()
		return outboxtest.Harness{Store: s, Inspector: s, Insert: func(_ context.Context, entries []outbox.Entry) error {
			return s.Add(entries...)
		}}
	}

	// In your package: func TestConformance(t *testing.T) { outboxtest.Run(t, newHarness) }
	conformance := func(t *testing.T) { outboxtest.Run(t, newHarness) }
	_ = conformance
}
