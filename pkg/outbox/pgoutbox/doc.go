// Package pgoutbox is the transactional outbox on PostgreSQL: a job is a row written in the
// caller's transaction, beside the business data, and a relay publishes it to SQS after the
// commit. A rolled-back transaction leaves no row, so no job; a committed one leaves a row that
// relays send, at least once, until SQS accepted it.
//
//	ob, err := pgoutbox.New(pgoutbox.Config{Producer: prod, DB: db})
//	err = ob.Migrate(ctx) // once; or apply schema.sql with your own migration tool
//
//	tx, err := db.BeginTx(ctx, nil)
//	_, err = tx.ExecContext(ctx, `INSERT INTO orders …`)
//	msg, err := ob.EnqueueTx(ctx, tx, ConfirmOrder{ID: 42}) // msg.ID is the job id, fixed now
//	err = tx.Commit()
//
// EnqueueTx takes any database/sql transaction (pgx's stdlib, lib/pq: the package imports no
// driver, and its statements take only text parameters) or a pgx.Tx through pgxoutbox.Tx.
// The row holds the whole prepared message (producer.Producer.Prepare: the envelope with its job
// id, the queue, the FIFO group and deduplication id, the delay), and the relay state:
// created_at, available_at, attempts, locked_by, locked_until, last_error and the state
// (pending or dead). EnqueueTx also calls pg_notify in the transaction, so listening relays are
// woken at commit.
//
// # The relay
//
// The Outbox is the outbox.Store of outbox.Relay (and the outbox.Inspector of `sqsworker outbox
// list|show|retry`). A claim is one statement, so one short transaction: it selects due rows
// (available_at ≤ now, no live lease) with FOR UPDATE SKIP LOCKED and sets locked_by,
// locked_until and attempts + 1. The relay sends them with producer.Producer.Send, then writes
// back in one statement: sent rows are deleted, failed ones get available_at = now + backoff
// and last_error, and after MaxAttempts they are dead (kept and listed until a person retries
// them). Every write-back is guarded by the claim (locked_by and attempts), so a relay that was
// paused past its lease never undoes the work of the relay that took its rows over. A relay
// that crashed leaves its rows to the others once locked_until has passed: they are sent
// again, with the same job ids, and the worker's idempotency runs their side effects once.
//
// FIFO queues: EnqueueTx first takes a transaction-scoped advisory lock for each FIFO message
// group it writes to (pg_advisory_xact_lock, the groups of a batch in one fixed order), and
// only then inserts, so two transactions writing to one group are serialized: the second waits
// in EnqueueTx until the first has committed or rolled back, and a group's insertion order
// (seq) is its commit order. A claim skips a group while such a transaction is open (its
// try-lock on the same key fails), and claims a row only when every earlier pending row of its
// group is claimed in the same statement (or dead), checked against the rows the statement
// actually locked. So concurrent relays never hold two rows of one group, and each group
// reaches SQS in commit order. Other groups are not held up; a dead row no longer holds its
// group (the decision is explained in package outbox). The lock is what the business
// transaction pays: an EnqueueTx on a FIFO group waits for every other open transaction that
// wrote to that group, as long as it stays open. Keep such transactions short, and write a
// transaction's FIFO jobs in one EnqueueBatchTx (two transactions that call EnqueueTx for
// groups a and b in opposite orders can deadlock, and PostgreSQL then aborts one of them).
// Jobs of standard queues take no lock.
//
// Latency: pgxoutbox.Listener LISTENs on a dedicated connection and is the relay's Wake; polling
// (RelayConfig.PollInterval) is the fallback, and the only way behind a pooler in transaction
// mode (PgBouncer), where LISTEN does not work: pgxoutbox.RunConfig.PollOnly. SendCommitted is
// an optional fast path that sends a transaction's jobs right after its commit and leaves only
// failures to the relays.
//
// Sent rows are deleted in the same statement as the other write-backs, a batch at a time; the
// table is created with aggressive autovacuum settings, so its size stays that of the rows in
// flight (docs/BENCHMARKS.md has the numbers).
//
// Clocks: claims compare the relay's clock with times written by the database (created_at is
// the transaction's now()); keep the hosts' clocks synchronized (NTP, as on AWS).
package pgoutbox
