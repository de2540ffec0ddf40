// Package jobstest tests code that enqueues jobs, and the jobs themselves, without AWS: an
// in-memory SQS queue with SQS's semantics, the real producer, the real worker with the
// idempotency middleware on a MemoryStore, a Lambda-like event source, and one settable Clock for
// all of them, so that a test steps through backoffs and delays at once.
//
// Assert what a piece of code enqueued (kind, typed args, options):
//
//	prod, q := jobstest.NewProducer(t)
//	signUp(ctx, prod, "ada@example.com") // the code under test
//	jobstest.RequireEnqueued(t, q, WelcomeEmail{To: "ada@example.com"}, &jobstest.Want{Key: "welcome-ada"})
//
// Run one job through the real worker path and get its outcome:
//
//	env := jobstest.New(t, jobstest.Config{Registry: reg})
//	res := env.Work(ctx, WelcomeEmail{To: "ada@example.com"})
//	// res.Final.Outcome == worker.OutcomeSucceeded, res.Record.State == idempotency.StateSucceeded,
//	// res.Outcomes has every attempt, res.Took the backoffs the clock stepped through.
//
// What is real: the producer's job building and validation, the worker (decoding, middleware,
// attempts, backoff through ChangeMessageVisibility, dead letters with their reason, deadlines:
// each invocation has Config.Timeout), the idempotency middleware and its store's rules
// (duplicates, cancellation requests, progress). What is not: the queue is in memory (no
// message size limit beyond the producer's own checks, no network), delayed jobs beyond 15
// minutes are scheduled here (Queue.Schedules) and fire at their exact time (EventBridge
// Scheduler fires within a minute), and the invocation's deadline is the Clock's time plus
// Timeout while its context ends after Timeout of real time.
package jobstest
