// Package pgxoutbox connects the PostgreSQL outbox (pkg/outbox/pgoutbox, which imports no
// driver) to pgx v5: Tx adapts a pgx transaction for EnqueueTx, Listener turns EnqueueTx's
// notifications into the relay's Wake (LISTEN on a dedicated connection), and RunRelay runs a
// relay with both, or polling only behind a pooler in transaction mode.
//
//	err := pgxoutbox.RunRelay(ctx, pgxoutbox.RunConfig{
//		Outbox:     ob, // a *pgoutbox.Outbox
//		ConnString: dsn,
//		Relay:      outbox.RelayConfig{Producers: []*producer.Producer{prod}},
//	})
//
// A relay woken by NOTIFY sends a committed job within milliseconds; polling stays the fallback,
// and the Listener signals after every (re)connection, since notifications sent while it was
// disconnected are lost, so no committed job waits longer than the poll interval. This is the
// only package of the module's libraries that imports a database driver. docs/outboxes.md is the
// guide, docs/OUTBOX.md the design.
package pgxoutbox
