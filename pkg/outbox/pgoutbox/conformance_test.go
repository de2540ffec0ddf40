package pgoutbox

import (
	"context"
	"testing"

	"github.com/sqsworker/sqsworker/internal/pgtest"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/outboxtest"
)

// The shared outbox contract, on a real PostgreSQL server: each case on a table of its own.
func TestConformance(t *testing.T) {
	db := openDB(t, pgtest.Database(t))
	outboxtest.Run(t, func(t *testing.T) outboxtest.Harness {
		o := newSchemaOutbox(t, db, Config{})
		return outboxtest.Harness{Store: o, Inspector: o, Insert: func(ctx context.Context, entries []outbox.Entry) error {
			return insertCommitted(ctx, db, o, entries)
		}}
	})
}
