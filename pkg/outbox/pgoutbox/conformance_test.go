package pgoutbox_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/sqsworker/sqsworker/internal/testenv/pgtest"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/outboxtest"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox"
)

// The shared outbox contract, on a real PostgreSQL server: each case on a table of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	db := openDB(t, pgtest.Database(t))
	outboxtest.Run(t, func(t *testing.T) outboxtest.Harness {
		o := newSchemaOutbox(t, db, pgoutbox.Config{})
		return outboxtest.Harness{Store: o, Inspector: o, Insert: func(ctx context.Context, entries []outbox.Entry) error {
			return insertCommitted(ctx, db, o, entries)
		}}
	})
}

func insertCommitted(ctx context.Context, db *sql.DB, o *pgoutbox.Outbox, entries []outbox.Entry) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := o.InsertEntries(ctx, tx, entries); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
