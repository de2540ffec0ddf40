// Package dynamooutbox is the transactional outbox on DynamoDB: a job is written in the same
// TransactWriteItems as the business data it belongs to, and a relay sends it to SQS afterwards.
// A cancelled transaction leaves no job; a committed one reaches the queue at least once, with
// the job id fixed at enqueue, so the worker's idempotency runs it once. docs/OUTBOX.md
// ("DynamoDB") has the design, the costs and the operations.
//
//	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: dynamodb.NewFromConfig(cfg), Table: "myapp-outbox"})
//	…
//	job, err := ob.Prepare(ctx, prod, WelcomeEmail{To: "ada@example.com"}, producer.WithKey("welcome-42"))
//	…
//	_, err = ob.Transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
//		putUser, // your business writes, with their conditions
//	}}, job) // both, or neither; a *TransactionError says which condition failed
//
// # Enqueue
//
// [Outbox.Prepare] validates a job with the producer of its queue and returns a [Job]: the
// outbox item as a types.TransactWriteItem (a Put that refuses a job id already in the outbox)
// and, with Config.Status, the job's "queued" record in the job table (status.QueuedWrite).
// Put j.Items into your own TransactWriteItemsInput, or let [Outbox.Transact] run your actions
// and the jobs' in one call. DynamoDB's limits (100 actions, 4 MB, 400 KB per item) and the
// envelope's 1 MiB are checked before the call ([Outbox.CheckTransaction], [ErrLimit]); large
// envelopes are stored gzip-compressed. A cancelled transaction is a [*TransactionError] that
// names the action that failed.
//
// # Where the jobs live
//
// In a table of their own (TableInput; "<stack>-outbox" in the CDK stack), not in the job
// table: its stream then carries only outbox inserts, a FIFO group's jobs can share a partition
// sorted by commit order (the job table has no sort key), and producers get PutItem on that
// table alone. Sent jobs are deleted (or kept, marked sent, until a TTL: Config.KeepSent).
//
// # Relay
//
// The Outbox is an [outbox.Store] and [outbox.Inspector]. Two paths send its jobs, and a
// conditional claim on each item decides which:
//
//   - the stream: [StreamRelay] handles batches of the table's stream (an event source mapping
//     in AWS: functions/relay; locally [Runner], on pkg/ddbstream), claiming each inserted job
//     and publishing it with outbox.Relay.Publish;
//   - the sweeper: outbox.Relay (Run, Drain, RunOnce) over the Outbox claims what is due from
//     the sparse by_state index: jobs the stream missed once they are Config.SweepAfter old,
//     and retries whose backoff has passed. In AWS a schedule invokes it every minute.
//
// Failed sends wait an exponential backoff with jitter and keep their error; after MaxAttempts
// a job is dead and listed (`sqsworker outbox list --state dead`, [Outbox.CountDead]) until
// retried. An item whose relay state other code made unreadable is dead at once, unsent.
package dynamooutbox
