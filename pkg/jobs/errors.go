package jobs

import (
	"errors"
	"fmt"
	"time"
)

// Reasons a job is dead-lettered, as written in the DLQ copy's sqsworker.failure attribute.
const (
	ReasonExhausted       = "exhausted"        // the job failed MaxAttempts times
	ReasonCancelled       = "cancelled"        // the worker returned Cancel(err)
	ReasonMalformed       = "malformed"        // the body is not a valid envelope, or its args do not decode
	ReasonUnknownKind     = "unknown_kind"     // no worker is registered for the kind
	ReasonPayloadMismatch = "payload_mismatch" // the key was seen before with different args
	ReasonPayloadMissing  = "payload_missing"  // the body points to an S3 object that is missing or cannot be read
	ReasonPayloadRefused  = "payload_refused"  // the body points to an S3 bucket the worker may not read (payload.Config.AllowedBuckets)
)

// CancelError stops a job's retries: the job is dead-lettered with the reason "cancelled".
// Create one with [Cancel].
type CancelError struct{ Err error }

func (e *CancelError) Error() string {
	if e.Err == nil {
		return "job cancelled"
	}
	return "job cancelled: " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *CancelError) Unwrap() error { return e.Err }

// Cancel returns an error that tells the worker not to retry the job. The job goes to the DLQ
// with the reason "cancelled" and err as its error.
func Cancel(err error) error { return &CancelError{Err: err} }

// RetryAfterError retries a job after Delay instead of its backoff. Create one with [RetryAfter].
type RetryAfterError struct {
	Delay time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("retry after %s", e.Delay)
	}
	return fmt.Sprintf("retry after %s: %s", e.Delay, e.Err)
}

// Unwrap returns the cause.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter returns an error that retries the job after d (it still counts as an attempt).
// A delay longer than SQS's visibility limit allows is served by re-sending a copy of the job.
// A negative d is treated as 0.
func RetryAfter(d time.Duration, err error) error {
	if d < 0 {
		d = 0
	}
	return &RetryAfterError{Delay: d, Err: err}
}

// DeadLetterError sends a job to the DLQ with Reason, without retrying. Middleware uses it (for
// example, an idempotency store reports "payload_mismatch"); workers normally use [Cancel].
type DeadLetterError struct {
	Reason string
	Err    error
}

func (e *DeadLetterError) Error() string {
	if e.Err == nil {
		return "dead-letter: " + e.Reason
	}
	return "dead-letter: " + e.Reason + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *DeadLetterError) Unwrap() error { return e.Err }

// DeadLetter returns an error that dead-letters the job with reason.
func DeadLetter(reason string, err error) error { return &DeadLetterError{Reason: reason, Err: err} }

// ErrSkipped, returned by middleware instead of calling the worker, acknowledges the job without
// running it (for example, a duplicate of a job that already succeeded). Wrap it to add detail.
var ErrSkipped = errors.New("job skipped")

// ErrSkippedCancelled wraps ErrSkipped for a job acknowledged without running because it was
// cancelled (its record says so), rather than because it is a duplicate of one that succeeded.
var ErrSkippedCancelled = fmt.Errorf("%w: cancelled", ErrSkipped)

// ArgsError reports args that do not decode into the kind's Args type. Such a job is never
// retried: it is dead-lettered as malformed.
type ArgsError struct {
	Kind string
	Err  error
}

func (e *ArgsError) Error() string {
	if e.Err == nil {
		return "decode args of kind " + e.Kind
	}
	return "decode args of kind " + e.Kind + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *ArgsError) Unwrap() error { return e.Err }

// DeferError reports a job that did not run and should be delivered again after Delay, without
// spending an attempt: for example, another worker holds its claim, or the idempotency store is
// unavailable. Create one with [Defer].
type DeferError struct {
	Delay time.Duration
	Err   error
	// Since, when set, is when the job's deferral began: a copy the worker re-sends for the
	// deferred job carries it in its meta (MetaDeferredSince), so that a middleware can bound
	// how long a job waits ([DeferUntilSince], [DeferredSince]). Zero leaves the meta as it is.
	Since time.Time
}

func (e *DeferError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("deferred for %s", e.Delay)
	}
	return fmt.Sprintf("deferred for %s: %s", e.Delay, e.Err)
}

// Unwrap returns the cause.
func (e *DeferError) Unwrap() error { return e.Err }

// Defer returns an error that reports the job as not run: its message comes back after d and the
// attempt does not count. Middleware returns it instead of calling the worker, and must sit
// outside (before) the idempotency middleware: a Defer returned inside a claim (by a worker or an
// inner middleware) is recorded as a failed run, which does count. A negative d is treated as 0.
//
// Each deferral is a receive of the message, and receives count towards the queue's
// maxReceiveCount, which bounds a Defer: the message is hidden again each time, and SQS's
// redrive policy moves it to the DLQ once deferred too often. A middleware that bounds the wait
// itself uses [DeferUntilSince] instead: from the job's third receive, the worker then re-sends a
// fresh copy (receive count 1, attempts_before unchanged, the deferral's start in its meta) and
// acknowledges the original, so such deferrals never use up the redrive budget (FIFO queues
// excepted: a copy would lose its place in its message group, so there the message waits in its
// visibility).
func Defer(d time.Duration, err error) error {
	if d < 0 {
		d = 0
	}
	return &DeferError{Delay: d, Err: err}
}
