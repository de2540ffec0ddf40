package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Long jobs: a job that may run longer than one invocation saves a cursor ([Checkpoint]) and
// reads it back when it starts ([Cursor]); the worker ends its run at the end of its slice (the
// invocation's deadline, or [WithSlice]) and sends it again to continue from that cursor,
// without spending an attempt; a job may also sleep ([Sleep], [SleepUntil]) and continue from
// its cursor afterwards. docs/LONG-JOBS.md is the guide; pkg/longjob has a typed loop on top.

// MetaContinuation is the envelope meta key of a continued job's copy: how many times the job
// was continued before (decimal). The worker writes it when it re-sends a job whose slice ended
// or that slept; the job's record (pkg/idempotency) keeps the authoritative count.
const MetaContinuation = "sqsworker.continuation"

// Defaults of a kind's limits on continued runs (see [WithMaxContinuations], [WithMaxRunTime]).
const (
	// DefaultMaxContinuations bounds how many times a job may be continued (slices that ended,
	// sleeps): 1,000, about ten days of 15-minute Lambda slices.
	DefaultMaxContinuations = 1000
	// DefaultMaxRunTime bounds a job's total run time over all its runs (slices and attempts;
	// not the time it waits or sleeps between them): 24 hours.
	DefaultMaxRunTime = 24 * time.Hour
)

// Errors of checkpoints and continued jobs.
var (
	// ErrSliceEnded is the cause of a job's context cancelled because its slice is over (the
	// invocation's deadline is near, or the kind's slice has passed) after the job saved a
	// checkpoint in this run; [Checkpoint] returns it too once the slice is over (the cursor is
	// saved). The job should return (any error, ctx.Err() will do): the worker sends it again at
	// once to continue from its last checkpoint, without spending an attempt.
	ErrSliceEnded = errors.New("jobs: the job's slice ended; it continues from its last checkpoint in a new run")
	// ErrNoCheckpointer: Checkpoint or Cursor was called outside a job run with a job table (the
	// idempotency middleware keeps cursors on the job's record), or after the job returned.
	ErrNoCheckpointer = errors.New("jobs: Checkpoint outside a running job with a job table (the idempotency middleware keeps cursors)")
	// ErrCursorTooLarge: the cursor's JSON is larger than the record may hold (16 KiB) and no S3
	// store is configured for larger ones (or it is larger than that store takes).
	ErrCursorTooLarge = errors.New("jobs: cursor too large")
	// ErrContinuationsExhausted: the job was continued as many times as its kind allows
	// ([WithMaxContinuations]); it is dead-lettered with the reason "exhausted".
	ErrContinuationsExhausted = errors.New("jobs: the job used up its continuations")
	// ErrRunTimeExhausted: the job ran as long in total as its kind allows ([WithMaxRunTime]);
	// it is dead-lettered with the reason "exhausted".
	ErrRunTimeExhausted = errors.New("jobs: the job used up its total run time")
)

// Checkpointer keeps a running job's cursor. The idempotency middleware puts one in the context
// of every job it claims (the cursor lives on the job's record, written under the claim); tests
// may install their own with [WithCheckpointer].
type Checkpointer interface {
	// SaveCheckpoint durably saves cursor (JSON) as the job's latest cursor, or returns an error
	// (wrapping ErrCursorTooLarge for a cursor it cannot keep).
	SaveCheckpoint(ctx context.Context, cursor []byte) error
	// LoadCheckpoint returns the job's latest cursor (this run's last SaveCheckpoint, else the one
	// an earlier run saved), or nil when it has none.
	LoadCheckpoint(ctx context.Context) ([]byte, error)
}

type checkpointerKey struct{}

// WithCheckpointer returns a context whose [Checkpoint] and [Cursor] calls go to c.
func WithCheckpointer(ctx context.Context, c Checkpointer) context.Context {
	return context.WithValue(ctx, checkpointerKey{}, c)
}

// Slicer is told of a job's saved checkpoints. The worker puts one in every job's context: it
// ends the job's slice (see [ErrSliceEnded]) only for a job that saved a checkpoint during the
// run, so that a job that did not keeps its behaviour (it runs to the invocation's deadline).
type Slicer interface {
	// Checkpointed records that the job saved a checkpoint, and reports whether its slice is
	// over (it then cancels the job's context with ErrSliceEnded).
	Checkpointed() bool
}

type slicerKey struct{}

// WithSlicer returns a context whose [Checkpoint] calls report to s.
func WithSlicer(ctx context.Context, s Slicer) context.Context {
	return context.WithValue(ctx, slicerKey{}, s)
}

// Checkpoint saves v, encoded as JSON, as the cursor of the job running in ctx: the position
// from which the job continues when its run ends before it is done (its slice ended, it failed,
// its worker crashed, it slept). It returns once the cursor is durably saved on the job's
// record: one conditional write under the job's claim (a worker that lost the claim cannot
// overwrite a newer cursor), at most 16 KiB of JSON on the record (MaxCursorBytes in
// pkg/idempotency), larger through S3 when the worker has a cursor store.
//
// It returns nil; or an error wrapping ErrSliceEnded when the cursor is saved and the job's
// slice is over: return it (the job continues from v in a new run); or another error (the
// cursor was not saved): one wrapping ErrCursorTooLarge, ErrNoCheckpointer outside a job run
// with a job table, a failed write, or a lost claim (the job should stop).
//
// Save a cursor after the work it covers is done (and, for exactly-once effects, make each
// step idempotent: a run that ends between two checkpoints is continued from the earlier one).
// Checkpoint may be called after the job's context was cancelled at the end of its slice: the
// write has its own time budget.
func Checkpoint(ctx context.Context, v any) error {
	c, ok := ctx.Value(checkpointerKey{}).(Checkpointer)
	if !ok || c == nil {
		return ErrNoCheckpointer
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("jobs: encode the cursor: %w", err)
	}
	if err := c.SaveCheckpoint(ctx, data); err != nil {
		return err
	}
	if s, ok := ctx.Value(slicerKey{}).(Slicer); ok && s != nil && s.Checkpointed() {
		return ErrSliceEnded
	}
	return nil
}

// Cursor decodes the cursor of the job running in ctx into v (a pointer) and reports whether
// there was one: false on the job's first run, true when this run or an earlier one saved a
// cursor with [Checkpoint] (a continued job, a retry after a failure or a crash). It returns
// ErrNoCheckpointer outside a job run with a job table.
func Cursor(ctx context.Context, v any) (bool, error) {
	c, ok := ctx.Value(checkpointerKey{}).(Checkpointer)
	if !ok || c == nil {
		return false, ErrNoCheckpointer
	}
	data, err := c.LoadCheckpoint(ctx)
	if err != nil || data == nil {
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("jobs: decode the cursor into %T: %w", v, err)
	}
	return true, nil
}

// CanCheckpoint reports whether ctx is the context of a job that can save checkpoints (one run
// by the idempotency middleware, or given a Checkpointer with WithCheckpointer). The worker ends
// slices only for such jobs.
func CanCheckpoint(ctx context.Context) bool {
	c, ok := ctx.Value(checkpointerKey{}).(Checkpointer)
	return ok && c != nil
}

// SliceEnded reports whether ctx, a job's context, was cancelled because the job's slice ended
// (its cause is ErrSliceEnded).
func SliceEnded(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrSliceEnded)
}

// ContinueError ends a job's run without ending the job: the worker sends the job again, to
// continue from its cursor, without spending an attempt — at once (its slice ended) or when its
// sleep is over. A job returns one from [Sleep] or [SleepUntil]; the worker makes one for a job
// whose slice ended (Slice set). A continued job counts against its kind's MaxContinuations.
type ContinueError struct {
	// Delay, or Until when set, is when the job continues (both zero: at once).
	Delay time.Duration
	Until time.Time
	// Slice reports that the worker ended the job's slice (rather than the job sleeping).
	Slice bool
	// Err is what the job returned, if anything.
	Err error
}

func (e *ContinueError) Error() string {
	var msg string
	switch {
	case e.Slice:
		msg = "slice ended; continues from its last checkpoint"
	case !e.Until.IsZero():
		msg = "sleeping until " + e.Until.UTC().Format(TimeLayout)
	case e.Delay > 0:
		msg = "sleeping for " + e.Delay.String()
	default:
		msg = "continues at once"
	}
	// A slice's end says it all when the job returned its context's error or ErrSliceEnded.
	if e.Err != nil && !(e.Slice && (errors.Is(e.Err, ErrSliceEnded) || errors.Is(e.Err, context.Canceled))) {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns what the job returned.
func (e *ContinueError) Unwrap() error { return e.Err }

// WakeAt returns when the job continues, given the time now.
func (e *ContinueError) WakeAt(now time.Time) time.Time {
	if !e.Until.IsZero() {
		return e.Until
	}
	return now.Add(max(e.Delay, 0))
}

// Sleep returns an error that ends the job's run and continues it after d, from its cursor,
// without spending an attempt and without running anything while it sleeps: up to 15 minutes
// the copy waits in SQS (DelaySeconds), longer through EventBridge Scheduler when the worker
// has a Scheduler, else in its message's visibility (see docs/LONG-JOBS.md). Save a checkpoint
// first if the job must not start over. A d of 0 or less continues at once.
func Sleep(d time.Duration) error { return &ContinueError{Delay: max(d, 0)} }

// SleepUntil is [Sleep] until t.
func SleepUntil(t time.Time) error { return &ContinueError{Until: t} }

// RestartError is a failure whose retry starts over: the job's cursor is removed. Create one
// with [Restart].
type RestartError struct{ Err error }

func (e *RestartError) Error() string {
	if e.Err == nil {
		return "restart from the beginning"
	}
	return "restart from the beginning: " + e.Err.Error()
}

// Unwrap returns the failure.
func (e *RestartError) Unwrap() error { return e.Err }

// Restart returns err as a failure whose retry starts from the beginning instead of the job's
// last checkpoint: the cursor is removed with the failure (the retry's [Cursor] reports none).
// It is retried (and counts as an attempt) as any failure is.
func Restart(err error) error { return &RestartError{Err: err} }

// LimitError is why a continued job was dead-lettered as "exhausted": it used up its
// continuations or its total run time. It wraps ErrContinuationsExhausted or
// ErrRunTimeExhausted.
type LimitError struct {
	// Limit is ErrContinuationsExhausted or ErrRunTimeExhausted.
	Limit error
	// Continuations and RunTime are what the job had used; MaxContinuations and MaxRunTime its
	// kind's limits.
	Continuations, MaxContinuations int
	RunTime, MaxRunTime             time.Duration
	// Err is what the job's last run returned, if anything.
	Err error
}

func (e *LimitError) Error() string {
	var msg string
	if errors.Is(e.Limit, ErrRunTimeExhausted) {
		msg = fmt.Sprintf("jobs: the job ran %s in total, its kind's limit is %s (jobs.WithMaxRunTime); it is not continued",
			e.RunTime.Round(time.Millisecond), e.MaxRunTime)
	} else {
		msg = fmt.Sprintf("jobs: the job was continued %d times, its kind's limit (jobs.WithMaxContinuations); it is not continued again",
			e.MaxContinuations)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the limit and what the job returned.
func (e *LimitError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Limit}
	}
	return []error{e.Limit, e.Err}
}

// ContinuationOf returns the continuation count an envelope's meta carries (MetaContinuation),
// 0 when absent or not a count.
func ContinuationOf(meta map[string]string) int {
	s, ok := meta[MetaContinuation]
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
