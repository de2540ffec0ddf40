package pgoutbox

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/sqsworker/sqsworker/internal/pgtest"
	"github.com/sqsworker/sqsworker/pkg/outbox"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// openDB opens a database/sql handle on dsn, closed when the test ends.
func openDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(20)
	db.SetMaxIdleConns(20)
	t.Cleanup(func() { db.Close() })
	return db
}

var schemas atomic.Int64

// newSchemaOutbox returns an Outbox on a table of its own (a fresh schema of db), migrated.
func newSchemaOutbox(t testing.TB, db *sql.DB, cfg Config) *Outbox {
	t.Helper()
	schema := fmt.Sprintf("s%d", schemas.Add(1))
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	cfg.DB = db
	cfg.Table = schema + ".outbox"
	o, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return o
}

// insertCommitted writes entries in a transaction of their own.
func insertCommitted(ctx context.Context, db *sql.DB, o *Outbox, entries []outbox.Entry) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := o.insert(ctx, tx, entries); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
