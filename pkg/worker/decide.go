package worker

import (
	"errors"
	"fmt"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/payload"
)

// action is what settling does with a message.
type action uint8

const (
	actAck        action = iota // leave it out of the failures: Lambda (or the poller) deletes it
	actRetry                    // ChangeMessageVisibility(visibility), report it failed
	actDeadLetter               // send it to the DLQ with the reason, then acknowledge
	actResend                   // send a copy to the source queue, then acknowledge
)

// Outcomes, as logged.
const (
	OutcomeSucceeded    = "succeeded"     // the worker returned nil
	OutcomeSkipped      = "skipped"       // middleware acknowledged it without running (duplicate)
	OutcomeRetry        = "retry"         // failed; retried after its backoff
	OutcomeDeadLettered = "dead_lettered" // sent to the DLQ with its reason
	OutcomeNotRun       = "not_run"       // not started (FIFO tail, deadline); comes back at once
	OutcomeAbandoned    = "abandoned"     // still running at the deadline
	OutcomeDeferred     = "deferred"      // its run_at is in the future; waits without running
	OutcomeContinued    = "continued"     // its slice ended, or it sleeps: re-sent to continue from its cursor
)

// Outcome is what became of one message of a batch, as reported to Config.OnBatch.
type Outcome struct {
	// MessageID is the SQS message id.
	MessageID string
	// QueueARN is the ARN of the queue the message came from (the event source).
	QueueARN string
	// JobID, Kind and Key are the job's ("" for a body that is not an envelope).
	JobID, Kind, Key string
	// Attempt is the attempt number of this delivery.
	Attempt int
	// Outcome is one of the Outcome* constants.
	Outcome string
	// Reason is the dead-letter reason, for OutcomeDeadLettered.
	Reason string
	// Err is the job's error, if any.
	Err error
	// SendErr is set when the DLQ send or re-send failed: the message was reported failed and
	// will come back.
	SendErr error
	// Ran reports whether the job was called; Duration is how long it ran.
	Ran      bool
	Duration time.Duration
	// Visibility is the visibility set on a message reported failed.
	Visibility time.Duration
	// Failed reports whether the message was reported as a batch item failure.
	Failed bool
	// QueueLatency is the time from SentTimestamp to the start of the batch.
	QueueLatency time.Duration
	// Payload describes the S3 object of a message whose body was a pointer (Config.Payload);
	// nil for an inline body.
	Payload *PayloadOutcome
	// Misrouted reports that the job's kind is routed to another queue than the one it came
	// from (Config.Routing): it ran all the same. Always false without Config.Routing, and for
	// kinds no worker is registered for.
	Misrouted bool
}

// PayloadOutcome is what the worker did with the S3 object of a pointer message.
type PayloadOutcome struct {
	// Pointer names the object.
	Pointer payload.Pointer
	// Bytes is the size read; Fetch how long GetObject took.
	Bytes int
	Fetch time.Duration
	// Err is why the object could not be read (the message was then retried or dead-lettered
	// as payload_missing), or nil.
	Err error
	// Done reports that the object was found marked done (payload.DoneTagKey): the message was
	// acknowledged as a duplicate without running.
	Done bool
	// Deleted and Marked report what became of the object after the job was settled
	// (Config.PayloadCleanup: deleted, or tagged done); CleanupErr is why that failed.
	Deleted, Marked bool
	CleanupErr      error
}

// result is the decision for one message.
type result struct {
	outcome    string
	act        action
	err        error         // the job's error, if any
	visibility time.Duration // actRetry
	reason     string        // actDeadLetter
	delay      time.Duration // actResend: DelaySeconds (≤ 15 min)
	runAt      time.Time     // actResend: the copy's run_at (zero: none)
	attempts   int           // actResend: the copy's attempts_before
	since      time.Time     // actResend of a deferred job: the copy's meta deferred_since (zero: as it was)
	// actResend: the copy's continuation count (meta jobs.MetaContinuation), when set
	setContinuation bool
	continuation    int
	scheduled       string        // actResend: the schedule that sends the copy (Config.Scheduler), when used
	ran             bool          // the job (or the malformed hook) was called
	attempt         int           // the job's attempt as the middleware left it (when ran)
	duration        time.Duration // how long it ran
	settled         bool          // a FIFO group already sent it (DLQ or re-send) in order
	sendErr         error         // the DLQ send or re-send failed: report the item failed
}

// maxDelay is SQS's longest DelaySeconds.
const maxDelay = 15 * time.Minute

// decide turns a job's return value into a result. capVis is the longest visibility SQS still
// accepts for this message; fifo says whether it came from a FIFO queue.
func decide(err error, info *jobs.Info, policy jobs.Policy, now time.Time, capVis time.Duration, fifo bool) result {
	if err == nil {
		return result{outcome: OutcomeSucceeded, act: actAck}
	}
	if errors.Is(err, jobs.ErrSkipped) {
		return result{outcome: OutcomeSkipped, act: actAck, err: err}
	}
	var (
		argsErr   *jobs.ArgsError
		deadErr   *jobs.DeadLetterError
		cancelErr *jobs.CancelError
		retryErr  *jobs.RetryAfterError
		deferErr  *jobs.DeferError
		contErr   *jobs.ContinueError
	)
	switch {
	case errors.As(err, &deferErr):
		// Not run: no attempt spent, so no exhaustion check.
		return decideDefer(deferErr, err, info, fifo, now, capVis)
	case errors.As(err, &argsErr):
		return deadLetter(jobs.ReasonMalformed, err)
	case errors.As(err, &deadErr):
		return deadLetter(deadErr.Reason, err)
	case errors.As(err, &cancelErr):
		return deadLetter(jobs.ReasonCancelled, err)
	case errors.As(err, &contErr):
		// The run ended without ending the job: no attempt spent (the kind's limits were checked
		// in core). After the dead letters and cancellations, which may wrap one (a cancellation
		// requested while the job ran, a limit reached).
		return decideContinue(contErr, err, info, now)
	}
	if info.Attempt >= info.MaxAttempts {
		return deadLetter(jobs.ReasonExhausted, err)
	}
	var delay time.Duration
	if errors.As(err, &retryErr) {
		delay = retryErr.Delay
		if delay > capVis {
			return result{outcome: OutcomeRetry, act: actResend, err: err,
				delay: min(delay, maxDelay), runAt: now.Add(delay), attempts: info.Attempt}
		}
	} else {
		delay = policy.Backoff(info.Attempt)
	}
	return result{outcome: OutcomeRetry, act: actRetry, err: err, visibility: min(max(delay, 0), capVis)}
}

func deadLetter(reason string, err error) result {
	return result{outcome: OutcomeDeadLettered, act: actDeadLetter, reason: reason, err: err}
}

// decideWait handles a message whose run_at is still ahead (a re-sent long retry). It never runs
// the job. Up to 15 minutes ahead on a standard queue, a fresh copy with DelaySeconds arrives on
// time with a receive count of 1; further ahead, the message sleeps in its visibility until 15
// minutes before run_at (or up to the cap), unless it was already received several times, in
// which case a fresh copy resets the count (so the redrive policy never sees the waits).
func decideWait(info *jobs.Info, fifo bool, now time.Time, capVis time.Duration) result {
	remaining := info.RunAt.Sub(now)
	if fifo {
		// FIFO queues have no per-message delay: wait in the visibility.
		return result{outcome: OutcomeDeferred, act: actRetry, visibility: min(remaining, capVis)}
	}
	if remaining <= maxDelay || info.ReceiveCount >= waitResendAfter {
		return result{outcome: OutcomeDeferred, act: actResend, delay: min(remaining, maxDelay),
			runAt: info.RunAt, attempts: info.AttemptsBefore}
	}
	return result{outcome: OutcomeDeferred, act: actRetry, visibility: min(remaining-maxDelay, capVis)}
}

// waitResendAfter is the receive count from which a waiting message is re-sent rather than
// hidden again.
const waitResendAfter = 3

// deferResendAfter is the receive count from which a deferred message (jobs.Defer) is re-sent
// rather than hidden again: each deferral is a receive, and receives count towards the queue's
// maxReceiveCount, so a job that keeps being deferred (waiting for a flow limit, a paused kind,
// a claim held elsewhere) would otherwise be moved to the DLQ by SQS, without a reason, however
// few attempts it spent. A copy is therefore received at most deferResendAfter-1 times for
// deferrals before it is replaced.
const deferResendAfter = waitResendAfter

// decideDefer handles a job deferred by a middleware (jobs.Defer): it did not run and spends no
// attempt. Its message is hidden for the delay (capped). A deferral that states when it began
// (DeferError.Since: the middleware bounds how long a job may wait, as pkg/flow does with
// MaxDeferral and deferred_too_long) is, from its third receive on a standard queue, replaced by a
// fresh copy instead (receive count 1, attempts_before unchanged, the deferral's start in its
// meta) sent with the delay (a delay beyond 15 minutes becomes the copy's run_at, which it waits
// for without running), and the original is acknowledged, so that the wait does not use up the
// queue's maxReceiveCount. A deferral without a start (a claim held elsewhere, the store
// unavailable) keeps its message: SQS's redrive policy is its bound, so that nothing defers
// forever. A FIFO message is always hidden: a copy would lose its place in its group.
func decideDefer(d *jobs.DeferError, err error, info *jobs.Info, fifo bool, now time.Time, capVis time.Duration) result {
	if fifo || d.Since.IsZero() || info.ReceiveCount < deferResendAfter {
		return result{outcome: OutcomeDeferred, act: actRetry, err: err, visibility: min(d.Delay, capVis)}
	}
	r := result{outcome: OutcomeDeferred, act: actResend, err: err, delay: min(d.Delay, maxDelay),
		attempts: info.AttemptsBefore, since: d.Since}
	if d.Delay > maxDelay {
		r.runAt = now.Add(d.Delay)
	}
	return r
}

// visibilityCap returns the longest visibility SQS accepts for a message received at about
// received: 12 hours from the receive, less margin.
func visibilityCap(received, now time.Time, margin time.Duration) time.Duration {
	c := jobs.MaxVisibility - now.Sub(received) - margin
	return max(c, 0)
}

// PanicError is the failure of a job that panicked. The stack is logged.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("job panicked: %v", e.Value) }
