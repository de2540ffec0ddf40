package demo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/sqsworker/sqsworker/examples/examplejobs"
	"github.com/sqsworker/sqsworker/internal/testenv/pgserver"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox/pgxoutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// outboxLabel is the demo row of the job written in a PostgreSQL transaction.
const outboxLabel = "written in a PostgreSQL transaction, sent by the outbox relay"

// demoPostgresOutbox shows the transactional outbox on PostgreSQL, when the server's binaries are
// on this machine: a throwaway cluster, a relay woken by LISTEN/NOTIFY, one order committed with
// its job (the relay sends it, and the worker runs it as any other job) and one rolled back with
// its job (never sent). Without the binaries it says so and adds nothing. The returned function
// stops the relay and the cluster; skipped is why there is no outbox row ("" when there is one).
func demoPostgresOutbox(ctx context.Context, w io.Writer, prod *producer.Producer, track *tracker, logger *slog.Logger) (stop func(), skipped string, err error) {
	srv, err := pgserver.Start(ctx, pgserver.Options{})
	if errors.Is(err, pgserver.ErrNotInstalled) {
		skipped = "no PostgreSQL server binaries on this machine: install them (" + pgserver.InstallHint + ") for the outbox row"
		fmt.Fprintf(w, "outbox    skipped: %s\n", skipped)
		return func() {}, skipped, nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("demo: start PostgreSQL: %w", err)
	}
	var db *sql.DB
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	stop = func() {
		cancel()
		wg.Wait()
		if db != nil {
			db.Close()
		}
		_ = srv.Stop()
	}
	fail := func(err error) (func(), string, error) {
		stop()
		return nil, "", fmt.Errorf("demo: outbox: %w", err)
	}
	dsn := srv.DSN("postgres")
	if db, err = pgxoutbox.OpenDB(dsn); err != nil {
		return fail(err)
	}
	ob, err := pgoutbox.New(pgoutbox.Config{Producer: prod, DB: db})
	if err != nil {
		return fail(err)
	}
	if err := ob.Migrate(ctx); err != nil {
		return fail(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id integer PRIMARY KEY, customer text NOT NULL)`); err != nil {
		return fail(err)
	}
	// The relay, as `sqsworker outbox relay` runs it: LISTEN on a connection of its own, polling
	// (here every minute) as the fallback.
	ready, ended := make(chan struct{}), make(chan struct{})
	var relayErr error
	wg.Go(func() {
		defer close(ended)
		relayErr = pgxoutbox.RunRelay(rctx, pgxoutbox.RunConfig{Outbox: ob, ConnString: dsn, OnReady: func() { close(ready) },
			Relay: outbox.RelayConfig{Producers: []*producer.Producer{prod}, PollInterval: time.Minute, Logger: logger}})
	})
	select {
	case <-ready:
	case <-ended:
		return fail(fmt.Errorf("the relay stopped at start: %v", relayErr))
	}

	order := func(id int, commit bool) (producer.Message, error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return producer.Message{}, err
		}
		defer tx.Rollback() //nolint:errcheck // a no-op after Commit
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders VALUES ($1, 'ada@example.com')`, id); err != nil {
			return producer.Message{}, err
		}
		m, err := ob.EnqueueTx(ctx, tx, examplejobs.EmailArgs{To: "ada@example.com", Subject: fmt.Sprintf("Order %d confirmed", id)})
		if err != nil {
			return producer.Message{}, err
		}
		if commit {
			err = tx.Commit()
		}
		return m, err
	}
	rolledBack, err := order(8, false)
	if err != nil {
		return fail(err)
	}
	m, err := order(7, true)
	if err != nil {
		return fail(err)
	}
	track.expectJob(outboxLabel, m.ID, m.Kind, m.Key)
	fmt.Fprintf(w, "outbox    %s on 127.0.0.1:%d (a throwaway cluster): order 7 committed with job %s,\n"+
		"          which the relay sends (woken by NOTIFY at the commit); order 8 rolled back with job\n"+
		"          %s, which is never sent\n", srv.Version, srv.Port, m.ID, rolledBack.ID)
	return stop, "", nil
}
