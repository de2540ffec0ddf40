package pgoutbox_test

import (
	"context"
	"flag"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/sqsworker/sqsworker/internal/testenv/pgtest"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox"
)

var update = flag.Bool("update", false, "rewrite schema.sql from SchemaSQL")

// schema.sql, for teams' own migration tools, is what SchemaSQL renders.
func TestSchemaFileIsCurrent(t *testing.T) {
	want, err := pgoutbox.SchemaSQL("")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("schema.sql", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Error("schema.sql is not SchemaSQL(DefaultTable): run go test ./pkg/outbox/pgoutbox -run TestSchemaFileIsCurrent -update")
	}
	if _, err := pgoutbox.SchemaSQL("Bad Name"); err == nil {
		t.Error("SchemaSQL accepted a bad table name")
	}
}

// Migrate is idempotent and safe when many processes run it at once; schema.sql applied by hand
// leaves Migrate nothing to do.
func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("concurrent", func(t *testing.T) {
		t.Parallel()
		db := openDB(t, pgtest.Database(t))
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() { errs <- pgoutbox.Migrate(ctx, db) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("concurrent Migrate: %v", err)
			}
		}
		if err := pgoutbox.Migrate(ctx, db); err != nil {
			t.Fatalf("Migrate again: %v", err)
		}
		var versions, max int
		if err := db.QueryRow(`SELECT count(*), max(version) FROM sqsworker_outbox_migrations`).Scan(&versions, &max); err != nil {
			t.Fatal(err)
		}
		if versions != pgoutbox.SchemaVersion || max != pgoutbox.SchemaVersion {
			t.Errorf("%d versions recorded, newest %d; want %d", versions, max, pgoutbox.SchemaVersion)
		}
	})
	t.Run("schema.sql by hand", func(t *testing.T) {
		t.Parallel()
		db := openDB(t, pgtest.Database(t))
		script, err := os.ReadFile("schema.sql")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(string(script)); err != nil {
			t.Fatalf("schema.sql: %v", err)
		}
		if err := pgoutbox.Migrate(ctx, db); err != nil {
			t.Fatalf("Migrate after schema.sql: %v", err)
		}
		var versions int
		if err := db.QueryRow(`SELECT count(*) FROM sqsworker_outbox_migrations`).Scan(&versions); err != nil || versions != pgoutbox.SchemaVersion {
			t.Errorf("versions %d, %v", versions, err)
		}
	})
	t.Run("newer schema", func(t *testing.T) {
		t.Parallel()
		db := openDB(t, pgtest.Database(t))
		if err := pgoutbox.Migrate(ctx, db); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO sqsworker_outbox_migrations (version, name) VALUES (999, 'from the future')`); err != nil {
			t.Fatal(err)
		}
		if err := pgoutbox.Migrate(ctx, db); err == nil || !strings.Contains(err.Error(), "newer than this program") {
			t.Errorf("Migrate on a newer schema = %v", err)
		}
	})
}
