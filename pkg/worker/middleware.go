package worker

import (
	"context"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// Middleware wraps the work of every job. It may inspect or change job (for example set Attempt
// from a store's run count), call next to run the job (and the middleware inside it), or not call
// it and return:
//   - nil or an error wrapping jobs.ErrSkipped: acknowledge the message without running the job;
//   - a *jobs.RetryAfterError: report the item failed and retry after its delay;
//   - a *jobs.DeferError: the job did not run; it comes back after the delay without spending an
//     attempt (for example, another worker holds its claim);
//   - a *jobs.DeadLetterError: dead-letter the message with its reason;
//   - any other error: a failure, retried after the kind's backoff.
//
// The worker checks MaxAttempts and decodes args inside the innermost next, so a store can set
// the attempt first.
type Middleware interface {
	Work(ctx context.Context, job *jobs.Info, next func(context.Context) error) error
}

// MiddlewareFunc adapts a function to a [Middleware].
type MiddlewareFunc func(ctx context.Context, job *jobs.Info, next func(context.Context) error) error

// Work calls f.
func (f MiddlewareFunc) Work(ctx context.Context, job *jobs.Info, next func(context.Context) error) error {
	return f(ctx, job, next)
}

// chain runs the middleware from index i inward, ending with core.
func chain(ctx context.Context, mws []Middleware, i int, job *jobs.Info, core func(context.Context) error) error {
	if i == len(mws) {
		return core(ctx)
	}
	return mws[i].Work(ctx, job, func(ctx context.Context) error { return chain(ctx, mws, i+1, job, core) })
}

// Observer sees each message of a batch, from the start of its work to its settlement:
// pkg/tracing implements it with a consumer span per message. The worker calls Start once for
// every message and then, after the batch's SQS calls (the DLQ sends, re-sends and visibility
// changes), Settled once with the context Start returned. A message that runs is started when
// its work starts, in the goroutine that runs it; one that never runs (malformed without a hook,
// an unknown kind, a run_at still ahead, a FIFO tail, a deadline skip) is started and settled
// together. Both methods may be called from many goroutines at once.
type Observer interface {
	// Start returns the context the message's work runs in (its middleware and the job itself):
	// ctx with, say, a span. info holds what is known of the message; it is shared with the job,
	// so read what you need of it here (a job abandoned at the deadline may still use it when
	// Settled is called).
	Start(ctx context.Context, info *jobs.Info) context.Context
	// Settled reports the message's outcome, with the context Start returned.
	Settled(ctx context.Context, o Outcome)
}
