// Package worker is the SQS batch handler: it runs the jobs of a Lambda SQS event (or a poller's
// batch) with bounded concurrency, in order per FIFO message group, within the invocation's
// deadline; it retries failures with backoff through the message's visibility, dead-letters
// exhausted, cancelled, malformed and unknown-kind jobs with the reason, and reports partial
// batch failures.
//
//	reg := jobs.NewRegistry()
//	jobs.MustRegister(reg, jobs.WorkFunc[WelcomeEmail](sendWelcome), jobs.WithMaxAttempts(5))
//	h, err := worker.New(worker.Config{Registry: reg, SQS: sqs.NewFromConfig(cfg)})
//	if err != nil {
//		log.Fatal(err)
//	}
//	lambda.StartHandler(h) // outside Lambda: poller.New(poller.Config{Handler: h, …})
//
// # Guarantees
//
//   - A message is left out of the batch's failures (so Lambda deletes it) only when its job
//     succeeded, was acknowledged as a duplicate by a middleware, or is safely in the DLQ: when
//     the dead letter's send fails, the item is reported failed and comes back.
//   - A dead letter is the original body and attributes plus the attribute [FailureAttribute]
//     (reason, error, attempts, kind, job id, time, source message and queue).
//   - A retry's delay is set on the message's visibility before the item is reported failed; a
//     delay beyond SQS's 12-hour limit re-sends a copy that carries attempts_before and run_at.
//   - A panic fails its own job only; the rest of the batch goes on.
//   - No job starts after the invocation's deadline less [Config.DeadlineMargin]: jobs not
//     started are reported failed with visibility 0, and a job still running at the deadline has
//     its context cancelled and comes back after [Config.AbandonGrace].
//   - On a FIFO queue the jobs of one message group run one after another, and after a failure
//     the rest of the group is reported failed without running, so their order holds.
//
// The worker imports no store: idempotency, status and metrics plug in through [Middleware],
// [Config.OnBatch] and [Config.Observer]. docs/writing-jobs.md is the guide, and
// docs/ARCHITECTURE.md §4 has the full semantics.
package worker
