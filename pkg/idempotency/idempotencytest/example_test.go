package idempotencytest_test

import (
	"testing"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/idempotency/idempotencytest"
)

// Run the suite from a test of your store's package: newStore returns an empty, isolated store
// for each case (a fresh table, or a key prefix of its own). Here the store is the package's
// MemoryStore; pkg/idempotency runs the suite against it and against the DynamoDB store on the
// embedded emulator.
func ExampleRun() {
	newStore := func(t *testing.T) idempotency.Store { return idempotency.NewMemoryStore() }

	// In your package: func TestConformance(t *testing.T) { idempotencytest.Run(t, newStore) }
	conformance := func(t *testing.T) { idempotencytest.Run(t, newStore) }
	_ = conformance
}
