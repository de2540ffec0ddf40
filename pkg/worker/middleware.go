package worker

import (
	"context"
	"sync/atomic"

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

// DeadLetterRecorder is an optional interface of a [Middleware] that keeps job records (the
// idempotency middleware implements it). A middleware that records a job's outcome when its next
// returns never sees the jobs dead-lettered around it: an unknown kind is dead-lettered before any
// middleware runs, and a middleware may dead-letter a job without calling next (the idempotency
// middleware does on a payload mismatch). So once a batch's dead letters are safely in the DLQ,
// the worker calls RecordDeadLetter of each middleware that implements it for every job of the
// batch it dead-lettered. A body that is not an envelope has no job and is left out, and so is a
// dead letter whose send failed (its message comes back).
//
// The calls come after the sends, outside every job's run, with the batch's context (several at
// once, at most one per job at a time), before Config.OnBatch; failures are the recorder's to
// log. job is the job's info (read it, do not keep it); reason is the dead-letter reason and err
// the error sent with it; calledNext reports whether this middleware called next for the job, so
// that its outcome came back through it (a middleware that records outcomes has recorded this
// one): false for an unknown kind, and for a job dead-lettered by this middleware or one outside
// it without calling next.
type DeadLetterRecorder interface {
	RecordDeadLetter(ctx context.Context, job *jobs.Info, reason string, err error, calledNext bool)
}

// chain runs the middleware from index i inward, ending with core. depth records how far in the
// job went: i + 1 once middleware i called next.
func chain(ctx context.Context, mws []Middleware, i int, job *jobs.Info, depth *atomic.Int32, core func(context.Context) error) error {
	if i == len(mws) {
		return core(ctx)
	}
	return mws[i].Work(ctx, job, func(ctx context.Context) error {
		if int32(i+1) > depth.Load() {
			depth.Store(int32(i + 1))
		}
		return chain(ctx, mws, i+1, job, depth, core)
	})
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
