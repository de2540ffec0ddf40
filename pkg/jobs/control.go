package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrCancelRequested is the cause of a job's context cancelled because someone asked to cancel
// the running job (`sqsworker cancel`, the console, pkg/status's Cancel): context.Cause(ctx) of
// the job's context is then a [*CancelRequestError], which matches it with errors.Is. A job that
// sees it should stop and return (any error): the job ends cancelled, is not retried, and its
// message goes to the DLQ with the reason "cancelled". A job that ignores it and finishes has
// its outcome recorded as what happened.
var ErrCancelRequested = errors.New("jobs: cancellation requested")

// CancelRequestError is the cause of a job's context cancelled on request (see
// [ErrCancelRequested]).
type CancelRequestError struct {
	// RequestedAt is when the cancellation was requested.
	RequestedAt time.Time
	// Reason is the reason given with the request ("" when none was).
	Reason string
}

func (e *CancelRequestError) Error() string {
	msg := "jobs: cancellation requested"
	if !e.RequestedAt.IsZero() {
		msg += " at " + e.RequestedAt.UTC().Format(TimeLayout)
	}
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// Is reports whether target is ErrCancelRequested.
func (e *CancelRequestError) Is(target error) bool { return target == ErrCancelRequested }

// MaxProgressMessageBytes bounds a progress message: a longer one is cut on a UTF-8 boundary.
const MaxProgressMessageBytes = 256

// Errors of [Progress].
var (
	// ErrNoProgressReporter: Progress was called with a context that is not a job's context run
	// with a job table (the idempotency middleware installs the reporter), or after the job
	// returned.
	ErrNoProgressReporter = errors.New("jobs: Progress outside a running job with a job table (the idempotency middleware reports progress)")
	// ErrInvalidProgress: the fraction is not a number from 0 to 1.
	ErrInvalidProgress = errors.New("jobs: invalid progress")
)

// ProgressReporter receives a job's progress reports. The idempotency middleware puts one in
// the context of every job it claims; tests may install their own with [WithProgressReporter].
type ProgressReporter interface {
	// ReportProgress records the job's progress: fraction (0 to 1, already checked) and message.
	ReportProgress(fraction float64, message string) error
}

type progressKey struct{}

// WithProgressReporter returns a context whose [Progress] calls go to r.
func WithProgressReporter(ctx context.Context, r ProgressReporter) context.Context {
	return context.WithValue(ctx, progressKey{}, r)
}

// Progress reports how far the job running in ctx is: fraction from 0 to 1 and a short message
// (at most MaxProgressMessageBytes; a longer one is cut), shown by `sqsworker status`, the
// console and the HTTP API. It never waits for the store: the idempotency middleware writes the
// latest report at most once per MiddlewareConfig.ProgressInterval (5 seconds by default), and
// the last one with the job's finishing write. The write also tells the worker whether a
// cancellation was requested.
//
// It returns an error wrapping ErrInvalidProgress for a fraction outside 0..1 (or NaN), and one
// wrapping ErrNoProgressReporter outside a job run by the idempotency middleware.
func Progress(ctx context.Context, fraction float64, message string) error {
	if !(fraction >= 0 && fraction <= 1) {
		return fmt.Errorf("%w: fraction %v (want 0 to 1)", ErrInvalidProgress, fraction)
	}
	r, ok := ctx.Value(progressKey{}).(ProgressReporter)
	if !ok || r == nil {
		return ErrNoProgressReporter
	}
	return r.ReportProgress(fraction, message)
}
