// Package jobs is sqsworker's job model: typed job arguments ([Args]), the job a worker receives
// ([Job]), workers ([Worker], [WorkFunc]), the [Registry] that maps kinds to workers with their
// options, the errors that steer a job ([Cancel], [RetryAfter]), the retry [Policy], and the
// envelope v1 wire format ([Envelope]) that producers in any language send.
//
//	type WelcomeEmail struct {
//		To string `json:"to"`
//	}
//
//	func (WelcomeEmail) Kind() string { return "email.welcome" } // the job's name on the wire
//
//	reg := jobs.NewRegistry()
//	jobs.MustRegister(reg, jobs.WorkFunc[WelcomeEmail](func(ctx context.Context, job *jobs.Job[WelcomeEmail]) error {
//		if job.Args.To == "" {
//			return jobs.Cancel(errors.New("no address")) // no retry: dead-lettered as "cancelled"
//		}
//		return send(ctx, job.Args.To) // an error: retried after the kind's backoff
//	}), jobs.WithMaxAttempts(5), jobs.WithTimeout(time.Minute))
//
// What a job's error means is fixed here and kept by pkg/worker: nil succeeds; a plain error is
// retried with the kind's [Policy] (full-jitter exponential backoff by default) until
// MaxAttempts, then dead-lettered as [ReasonExhausted]; [Cancel] and [DeadLetter] dead-letter at
// once; [RetryAfter] retries after the given delay. An envelope that does not decode is
// [ErrMalformed], and decoding is strict about the version and the required fields, so a
// producer's mistake is caught at the first delivery (docs/envelope.md).
//
// Jobs longer than an invocation save a cursor with [Checkpoint] and read it back with [Cursor];
// the worker ends a checkpointing job's run at the end of its slice ([ErrSliceEnded],
// [WithSlice]) and continues it in a new run, without spending an attempt; [Sleep] and
// [SleepUntil] continue a job later; [Restart] retries it from the beginning
// (docs/LONG-JOBS.md).
//
// It is the ground floor of the module and imports no other sqsworker package.
package jobs
