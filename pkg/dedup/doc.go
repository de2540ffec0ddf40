// Package dedup deduplicates jobs when they are enqueued, before anything reaches the queue:
// unique jobs over a window ([Unique]), debounce ([Debounce]) and throttled enqueue
// ([Throttle]). The worker's idempotency runs a job's side effect once per key; this package
// keeps the duplicates from being enqueued at all (a double-clicked "export" is one message, one
// claim, one run).
//
//	enq, err := dedup.New(dedup.Config{Producer: prod, DynamoDB: ddb, Table: "myapp-jobs", Jobs: jobsTable})
//	…
//	res, err := enq.Enqueue(ctx, ExportArgs{User: 7}, dedup.Unique{Fields: []string{"user"}, Window: time.Hour, States: dedup.WhileActive})
//	if res.Outcome == dedup.Duplicate {
//		fmt.Println("already queued as", res.ID) // nothing was sent
//	}
//
// An [Enqueuer] wraps a producer (*producer.Producer: the job is built, validated and sent by
// it) and keeps its items in the job table, beside the job records (pkg/status), under
// partition keys of their own ("$uniq#", "$debounce#", "$throttle#"; docs/TABLE.md). The
// guide is docs/DEDUP.md.
//
// # Guarantees
//
//   - Unique: the check and the record are one conditional PutItem before the send (1 write
//     unit; no read when the key is free). A duplicate sends nothing and returns the holding
//     job's id (Outcome Duplicate). Without the outbox the write and the send are two steps: a
//     send that fails releases the key at once (one UpdateItem), and a process that stops
//     between them holds the key only until Config.ReserveLease (1 minute) is over, after which
//     a job without a record counts as never sent. With the DynamoDB outbox ([Enqueuer.UniqueWrite])
//     the reservation commits with the job and the business data, or not at all.
//   - A unique key's job is judged by its record in the job table (queued, running, succeeded…):
//     the producer's queued record (producer.Config.Status), or the Enqueuer's own when the
//     producer writes none. WhileActive frees the key once the job is over; a rule for any
//     state holds it for the whole window.
//   - Debounce: one job per key and quiet period, carrying the last enqueue's args, run at most
//     MaxWait after the first enqueue. Its schedule is created before the key's item names it,
//     so a process that stops in between adds a job rather than losing one; concurrent enqueues
//     converge on the args of the item's last write. The schedule sends the job to the queue
//     the producer prepared it for (a producer of several queues: its kind's queue, through a
//     [QueueScheduler]).
//   - Throttle: at most Limit enqueues of a key per fixed window of Period, one conditional
//     write each; a dropped enqueue is an error ([ErrThrottled]), since its job will not run.
//   - Every rule is checked before anything is written: bad windows, periods and combinations
//     (a FIFO deduplication id of the job's own under a unique key, a delay under a debounce…)
//     wrap [ErrInvalid], which is producer.ErrInvalid.
package dedup
