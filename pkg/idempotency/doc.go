// Package idempotency makes a job's side effects run once per job key, although SQS delivers at
// least once. A [Store] keeps one record per job key (scoped by kind): the worker claims it with
// one conditional write before running the job and completes or fails it afterwards. The same
// record carries the job's status (pkg/status reads and lists it).
//
//	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: dynamodb.NewFromConfig(cfg), Table: "myapp-jobs"})
//	…
//	idem, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: store})
//	…
//	h, err := worker.New(worker.Config{Registry: reg, SQS: sqsClient, Middleware: []worker.Middleware{idem}})
//
// # Guarantees
//
//   - A job runs only under its claim. When the store fails, the job is deferred (not run, no
//     attempt spent) unless [MiddlewareConfig.FailOpen] says otherwise.
//   - A key that succeeded is acknowledged without running for [MiddlewareConfig.SucceededTTL]
//     (24 hours by default). A delivery that finds the job running elsewhere is deferred until
//     that claim's lease ends, without spending an attempt.
//   - The attempt number comes from the record's run count, not from SQS's receive count, which
//     also counts deliveries that never ran.
//   - The same key with different args is dead-lettered as payload_mismatch, never run.
//   - A job's outcome is one write: succeeded, retrying with the error, or dead with the reason.
//   - A running job can be asked to stop (pkg/status's Cancel of a running job writes a
//     cancellation request on its record): the middleware looks at the record at least every
//     [MiddlewareConfig.CancelCheck] (a lease renewal or a progress write returns it; otherwise
//     one eventually consistent read), cancels the job's context with a *jobs.CancelRequestError,
//     and a job that then fails ends cancelled, dead-lettered with the reason "cancelled", never
//     retried. A job that finishes anyway keeps its outcome. No claim takes such a job over; its
//     next delivery records the cancellation if its worker crashed.
//   - jobs.Progress reports a job's progress: written at most once per
//     [MiddlewareConfig.ProgressInterval], the last report with the finishing write.
//   - A long job's cursor (jobs.Checkpoint) is on its record, written under its claim with a
//     number no stale writer can overtake; a run that ends without ending the job (a slice that
//     ended, a sleep) is recorded queued or scheduled in its finishing write, which takes back the
//     claim's run: continuations spend no attempt (docs/LONG-JOBS.md).
//
// Stores: [MemoryStore] (one process; tests) and [DynamoDBStore]. Any Store must pass the
// conformance suite in pkg/idempotency/idempotencytest. Every write under a running claim (a
// renewal, a progress report, and the checkpoints of later capabilities) is [Store.Touch]: one
// write conditioned on the claim's token that returns the record after it. The DynamoDB table's layout and the
// write units per job are in docs/TABLE.md; the guide is docs/writing-jobs.md.
package idempotency
