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
