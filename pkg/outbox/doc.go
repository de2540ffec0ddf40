// Package outbox is the transactional outbox: a job is written in the same database transaction
// as the business data it belongs to, and a relay publishes it to SQS afterwards, retrying until
// SQS accepted it. The chain "the API returned" → "the job is durably queued" then has no gap: a
// crash after the commit leaves the job in the outbox for the relay, and a rolled-back
// transaction leaves no job at all.
//
// This package holds what every outbox shares, whatever its database:
//
//   - [Entry], one outboxed job: a [producer.Message] (built by [producer.Producer.Prepare], so
//     the job id is fixed at enqueue and a re-send is the same job to the worker's idempotency)
//     plus its relay state: attempts, the claim (LockedBy, LockedUntil), AvailableAt, LastError.
//   - [Store], what a relay needs of a database: claim due entries and write back the outcome,
//     each write guarded by the claim, so that a relay whose lease ran out never undoes the work
//     of the relay that took over.
//   - [Relay], which claims, sends with [producer.Producer.Send] and writes back: sent entries
//     leave the outbox, failed ones wait an exponential backoff with jitter, and after
//     MaxAttempts they are dead, kept for a person ([Inspector.Retry]).
//
// The databases live in their own packages: pkg/outbox/dynamooutbox (TransactWriteItems, a
// DynamoDB Streams relay and a claim-based sweeper) and pkg/outbox/pgoutbox (a row in the
// caller's PostgreSQL transaction, FOR UPDATE SKIP LOCKED, LISTEN/NOTIFY). Both pass the
// conformance suite in pkg/outbox/outboxtest, which a store of your own can run too.
//
//	relay, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Producers: []*producer.Producer{prod}})
//	…
//	stats, err := relay.Drain(ctx) // claim, send, write back, until nothing is due
//
// # Semantics
//
// A relay that is stopped (its context cancelled) sends nothing more, but lets a send already
// in flight finish (within half the lease) and writes back its outcome, so that a stop does not
// turn into duplicates. An entry claimed more than MaxAttempts times without a write-back (every
// relay that claimed it crashed or timed out with it, say because it is too large for the
// relay's memory) ends dead unsent, rather than being claimed for ever.
//
// At least once into SQS, once in effect: a relay that crashes after SQS accepted an entry and
// before it wrote that back leaves the entry claimed; once the claim's lease has passed, a relay
// claims and sends it again, with the same job id, and the worker's idempotency store runs its
// side effects once.
//
// FIFO queues: an entry is not claimed while an earlier pending entry of its message group is
// unsent (claimed or waiting for a retry), and [producer.Producer.Send] sends the entries of a
// group one request after another, stopping the group at its first failure. Each group is
// delivered in commit order; other groups are not held up. The entries behind a failed one are
// released: no attempt spent, available again at once.
//
// Dead entries, a decision: a dead entry no longer holds its group back, as SQS moves a FIFO
// message that exhausted its receives to the DLQ and delivers the rest of its group. Order holds
// among the entries that are sent; an entry a person retries ([Inspector.Retry]) after it died
// is sent after the later entries of its group that went meanwhile. For strict order instead,
// set RelayConfig.MaxAttempts so high that an entry never dies in practice (a failing entry
// holds its group while it waits for its retries) and alarm on the oldest pending entry.
//
// An entry delayed beyond what SQS's DelaySeconds holds (15 minutes; any delay on a FIFO queue)
// needs a producer with a Scheduler. A relay whose producer has none defers such an entry, with
// no attempt spent, until the delay fits (RunAt − 15 minutes; RunAt on FIFO), instead of failing
// it until it is dead.
//
// [Inspector.Retry] refuses (ErrClaimed) a pending entry a relay holds a live claim on: clearing
// the claim would make that relay's guarded write-back fail and the entry be sent twice.
package outbox
