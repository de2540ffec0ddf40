// Package longjob runs jobs longer than one Lambda invocation: a job saves a cursor as it goes,
// the worker ends its run at the end of its slice and sends it again to continue from that
// cursor, and a job may sleep for hours or days without anything running meanwhile.
//
// The pieces live where they belong: pkg/jobs has the API a job calls (jobs.Checkpoint,
// jobs.Cursor, jobs.Sleep, jobs.SleepUntil, jobs.Restart, and the kind options jobs.WithSlice,
// jobs.WithMaxContinuations, jobs.WithMaxRunTime); the idempotency middleware keeps the cursor on
// the job's record (one conditional write per checkpoint, under the job's claim); the worker ends
// slices and re-sends continued and sleeping jobs (worker.Config.Slice, SliceGrace, Scheduler).
// This package adds [Iterate], a typed loop over a cursor that saves checkpoints at a bounded
// rate and stops cleanly at the end of a slice. docs/LONG-JOBS.md is the guide.
//
// # Guarantees
//
//   - A checkpoint is durable when jobs.Checkpoint returns nil (or jobs.ErrSliceEnded): it is on
//     the job's record, written conditionally on the job's claim token and on its number being
//     above the record's, so a worker that lost the claim (its lease expired, another took over)
//     never overwrites a newer cursor.
//   - A continued job (its slice ended, it slept) spends no attempt: its record's run count is
//     taken back in the same write that records the continuation, and the copy carries the same
//     attempts_before. Continuations and total run time are bounded per kind; past them the job
//     is dead-lettered with the reason "exhausted" and a jobs.LimitError saying which limit.
//   - A failed job is retried from its last checkpoint (unless it returned jobs.Restart); a
//     crashed or timed-out run is taken over after its lease and goes on from its last
//     checkpoint too. Only the work after the last checkpoint is done again: make each step
//     idempotent for exactly-once effects.
//   - A job that never checkpoints keeps the worker's usual behaviour: it runs until the
//     invocation's deadline, and is abandoned and retried (an attempt) if it overruns it.
//
// # Example
//
//	type Backfill struct{ Table string }
//
//	func (Backfill) Kind() string { return "backfill" }
//
//	jobs.MustRegister(reg, jobs.WorkFunc[Backfill](func(ctx context.Context, job *jobs.Job[Backfill]) error {
//		return longjob.Iterate(ctx, "", func(ctx context.Context, after string) (string, bool, error) {
//			last, more, err := copyPageAfter(ctx, job.Args.Table, after) // idempotent
//			return last, !more, err
//		}, longjob.Options{})
//	}), jobs.WithSlice(10*time.Minute))
package longjob
