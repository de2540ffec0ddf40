// Package batch runs sets of jobs as a batch with one callback when they have all finished, and
// jobs as a chain, each step enqueued when the one before it succeeded, with its result.
//
//	client, err := batch.New(batch.Config{Client: ddb, Table: "myapp-jobs", Outbox: ob})
//	…
//	cb, err := prod.Prepare(ctx, AlbumReady{Album: "a1"})
//	b, err := client.Enqueue(ctx, prod, batch.Spec{Callback: &cb}, thumbnails...) // start, add, seal
//	…
//	// The worker counts children with the batch Store around its idempotency store:
//	store, err := client.WrapStore(idemStore)
//	idem, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: store})
//	…
//	// In the callback's worker:
//	sum, ok := batch.SummaryFrom(ctx) // sum.Succeeded, sum.Dead, sum.Cancelled, sum.NotSucceeded
//
// # Guarantees
//
//   - A child is counted once. Its final outcome (succeeded, dead-lettered, cancelled) and its
//     batch's counters are one DynamoDB transaction, conditioned on the child's claim and on what
//     the child was counted as before: a duplicate delivery, a retry, a crash between the write
//     and the message's delete, or a redrive never counts it twice. A redriven dead child that
//     then succeeds moves its count from dead to succeeded (the batch's remaining stays).
//   - The callback is enqueued exactly once: the transaction that counts the last child of a
//     sealed batch (or the seal of a batch whose children have all finished) also puts the
//     callback, with the batch's Summary, into the DynamoDB outbox, whose relay sends it. A crash
//     anywhere leaves either nothing written or all of it. The callback cannot fire before the
//     seal; an empty batch fires at once.
//   - Children are counted before they are sent (Add), or in the same transaction as their outbox
//     items (AddThroughOutbox, Prepare): no child finishes uncounted. Add is idempotent for the
//     same children in the same order, so a build that crashed is resumed by adding again.
//   - A chain's next step is put into the outbox by the transaction that records the success of
//     the step before it, with that step's result (SetResult, PreviousResult); a step that is
//     dead-lettered or cancelled stops the chain, whose state says where and why.
//
// Batches and chains are items of the job table ("batch:<id>", "chain:<id>"; docs/TABLE.md), and
// need the DynamoDB outbox (its table and relay). A batch's counters are on its own item, which
// counts at most about 500 children per second (DynamoDB's 1,000 write units a second per item, 2
// per transactional update): a batch whose children finish faster than about 100 a second
// spreads them over Spec.CounterShards items (one per 100 a second, up to MaxCounterShards), at
// about 8 write units per shard per batch and nothing per child; the completion stays one
// transaction. Costs, limits and operations: docs/BATCHES.md ("Counter shards").
package batch
