package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// State is a job record's state in the status lifecycle:
//
//	queued / scheduled → running → succeeded | retrying → … → dead;  cancelled
type State string

// The states.
const (
	StateQueued    State = "queued"    // written by the producer when asked
	StateScheduled State = "scheduled" // a delayed job waiting in the scheduler
	StateRunning   State = "running"   // claimed: a worker is running it until LeaseUntil
	StateSucceeded State = "succeeded" // done; duplicates are acknowledged without running
	StateRetrying  State = "retrying"  // failed; claimable by the next delivery
	StateDead      State = "dead"      // dead-lettered; claimable again after a redrive
	StateCancelled State = "cancelled" // cancelled; deliveries are acknowledged without running
)

// Claimable reports whether a record in state s (not expired) may be claimed; running records
// also when their lease has expired.
func (s State) Claimable() bool {
	switch s {
	case StateQueued, StateScheduled, StateRetrying, StateDead:
		return true
	}
	return false
}

// Record is a job key's record.
type Record struct {
	// Kind and Key identify the record (the key is scoped by kind).
	Kind, Key string
	// JobID is the id of the job that last wrote the record.
	JobID string
	// State is the record's state.
	State State
	// Runs is the attempt number of the running (or last) claim: the claims that started the
	// job, counted from the attempts its envelope says earlier copies spent
	// (ClaimRequest.AttemptsBefore). A claim sets it to max(Runs, AttemptsBefore) + 1.
	Runs int
	// Token identifies the current claim; Complete, Fail and Renew must present it.
	Token string
	// LeaseUntil is when a running claim expires and may be taken over.
	LeaseUntil time.Time
	// PayloadHash is jobs.PayloadHash of the job's kind and args.
	PayloadHash string
	// LastError is the last failure's error text (truncated); kept after a later success.
	LastError string
	// Reason is the dead-letter reason of a dead record, or the reason given to a cancellation.
	// A claim removes it (a dead job claimed again, after a redrive, is no longer dead), and so
	// does pkg/status's reset for a redrive; LastError stays.
	Reason string
	// Result is what a succeeded job stored with SetResult (at most MaxResultBytes), for
	// status lookups; duplicates are acknowledged without running.
	Result string
	// DeadMessageID is the SQS message whose run made the record dead. That message coming back
	// (its DLQ send failed) must not run the job again; a redriven copy is a new message. A claim
	// removes it.
	DeadMessageID string
	// FirstAttemptAt and LastAttemptAt are the first and latest claim times.
	FirstAttemptAt, LastAttemptAt time.Time
	// UpdatedAt is the time of the last write.
	UpdatedAt time.Time
	// ExpiresAt is when the record stops counting (zero: never). An expired record is treated as
	// absent, whatever DynamoDB's TTL deletion lag.
	ExpiresAt time.Time
	// Progress is the last progress the running (or last) run reported (jobs.Progress), written
	// by Touch or with the run's Finish; its At is zero when the run reported none. A claim
	// removes it: a new run starts without progress.
	Progress Progress
	// CancelRequestedAt is when a cancellation of the running job was requested (pkg/status's
	// Cancel of a job whose claim is live); zero when none was. The worker holding the claim
	// learns of it from the record a Touch returns (or from a read) and cancels the job's
	// context. It stays on the record after the run as a trace of the request; a claim removes
	// it.
	CancelRequestedAt time.Time
	// CancelReason is the reason given with the cancellation request (at most
	// MaxCancelReasonBytes), "" when none was.
	CancelReason string
	// Cursor is the job's last checkpoint (jobs.Checkpoint), written by Touch under the claim.
	// Claims keep it (a continued, retried or taken-over job goes on from it); a success or a
	// restart (Finish.ClearCursor) removes its value and keeps its number, time and size.
	Cursor Cursor
	// Continuations counts the runs that ended without ending the job (Finish.Continue: a slice
	// that ended, a sleep).
	Continuations int
	// RunTime is the job's total run time: the sum of Finish.RunTime over its runs.
	RunTime time.Duration
}

// Cursor is a job's saved checkpoint as its record keeps it.
type Cursor struct {
	// Value is the cursor's JSON when the record holds it (at most MaxCursorBytes), "" when the
	// cursor is in S3 (Pointer) or there is none.
	Value string
	// Pointer is the S3 pointer (payload.Pointer's message body) of a cursor larger than
	// MaxCursorBytes, kept in an object of its own; "" otherwise.
	Pointer string
	// Bytes is the size of the cursor's JSON, wherever it is kept.
	Bytes int
	// Seq numbers the job's checkpoints from 1: a Touch carries the next number, and is refused
	// by a record whose number is not lower (ErrStaleCursor), so that no write overtakes a newer
	// cursor. It stays when the value is removed.
	Seq int64
	// At is when the cursor was saved.
	At time.Time
}

// Saved reports whether c holds a cursor (a value or a pointer).
func (c Cursor) Saved() bool { return c.Value != "" || c.Pointer != "" }

// Progress is a running job's progress as it reported it (jobs.Progress).
type Progress struct {
	// Fraction is how far the job is, from 0 to 1 (stores keep 4 decimal places).
	Fraction float64
	// Message says what the job is doing, at most MaxProgressMessageBytes of valid UTF-8. It is
	// the job's own text: show it escaped.
	Message string
	// At is when the job reported it; zero: no progress.
	At time.Time
}

// IsZero reports whether p is no progress at all.
func (p Progress) IsZero() bool { return p.At.IsZero() }

// Expired reports whether the record has expired at now.
func (r *Record) Expired(now time.Time) bool {
	return !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)
}

// ClaimRequest asks to start a job.
type ClaimRequest struct {
	// Kind, Key and JobID identify the job; with the store's layout they name its record (a job
	// whose key is its id has its record under its id, see Layout).
	Kind, Key, JobID string
	// MessageID is the SQS message of this delivery. A dead record refuses the message that was
	// dead-lettered (see Record.DeadMessageID). Empty: not checked.
	MessageID string
	// PayloadHash must equal the record's, if it has one; otherwise the claim is refused and the
	// record returned (the caller dead-letters the job as payload_mismatch).
	PayloadHash string
	// AttemptsBefore is the envelope's attempts_before: attempts earlier copies of the job spent
	// (a re-send, a requeue by another producer). The claim counts them as runs already spent:
	// the record's Runs becomes max(Runs, AttemptsBefore) + 1, so that a new record's first
	// attempt is AttemptsBefore + 1, as it is without a store. Must not be negative.
	AttemptsBefore int
	// Token identifies this claim (unique per attempt).
	Token string
	// Now is the claim time; LeaseUntil ends the claim unless renewed.
	Now, LeaseUntil time.Time
	// ExpiresAt is the running record's expiry (a safety net for records that are never
	// completed). Zero: never.
	ExpiresAt time.Time
	// Fresh hints that the job probably has no record yet (its first delivery, and no producer
	// recorded it as queued or scheduled). A store may then first try a write that succeeds only
	// where there is no record, which is cheaper than the general claim, and falls back to the
	// general claim when a record exists (DynamoDBStore: a conditional PutItem, then the
	// UpdateItem). The result is the same either way; a wrong hint only costs a refused write.
	Fresh bool
	// Meta is the job's envelope meta (nil when it has none). The stores here ignore it; a
	// Store that wraps one may act on it (pkg/batch counts a batch's children by it).
	Meta map[string]string
}

// ClaimResult is the answer to a claim.
type ClaimResult struct {
	// Claimed reports whether the caller now holds the claim.
	Claimed bool
	// Record is the record after the claim when Claimed (Runs includes this run), else the
	// existing record that refused it.
	Record Record
}

// Finish ends a claim.
type Finish struct {
	// Kind, Key and JobID name the record as the claim's ClaimRequest did (JobID is needed to
	// find the record of a job whose key is its id; without it the record is looked for under
	// ItemKey(Kind, Key)); Token is the claim's.
	Kind, Key, JobID, Token string
	// State is StateSucceeded, StateRetrying, StateDead or StateCancelled.
	State State
	// Error is the failure's text (stores truncate it); empty for a success, which keeps the
	// record's previous LastError.
	Error string
	// Reason is the dead-letter reason, for StateDead.
	Reason string
	// MessageID is the delivery's SQS message id, kept as the record's DeadMessageID for StateDead.
	MessageID string
	// Result is stored with a success (StateSucceeded); empty keeps none.
	Result string
	// NotRun says that the claimed job did not run: its attempt (the claim's Runs) was beyond its
	// MaxAttempts, so the worker dead-lettered it as exhausted without running it. The same write
	// takes back the run the claim counted (Runs - 1, that is max(runs before the claim,
	// AttemptsBefore)), so that the record counts only real runs and the attempts earlier copies
	// spent. The claim's attempt times stay.
	NotRun bool
	// Now is the time of the write; ExpiresAt the record's new expiry (zero: never).
	Now, ExpiresAt time.Time
	// Meta is the job's envelope meta (nil when it has none), as in ClaimRequest: stores ignore
	// it, a wrapping Store may act on it.
	Meta map[string]string
	// Progress, when not nil, is the run's last progress report that no Touch has written yet:
	// the finishing write records it at no extra cost. Nil keeps what the record has.
	Progress *Progress
	// Continue says that the run ended without ending the job (jobs.ContinueError: its slice
	// ended, or it sleeps): State is StateQueued (it continues at once) or StateScheduled (it
	// continues at RunAt). The same write takes back the run the claim counted (as NotRun does:
	// a continuation spends no attempt), counts one more continuation, and keeps the cursor.
	// A record carrying a cancellation request is recorded cancelled instead
	// (ErrRecordedCancelled), as a failure is.
	Continue bool
	// RunAt is when a sleeping job continues (State StateScheduled with Continue), kept in the
	// record's run_at attribute for status reads (pkg/status's Job.RunAt).
	RunAt time.Time
	// RunTime is how long the run took; it is added to the record's RunTime.
	RunTime time.Duration
	// ClearCursor removes the cursor's value (or pointer) with the finish: a success, whose
	// cursor is of no more use, or a failure that restarts the job (jobs.Restart). Its number,
	// time and size stay.
	ClearCursor bool
}

// Touch updates a running claim's record under its token (Store.Touch): it renews the lease,
// records the job's progress, or both. Every field it writes is optional, but it must write one.
type Touch struct {
	// Kind, Key and JobID name the record as the claim's ClaimRequest did; Token is the claim's.
	Kind, Key, JobID, Token string
	// Now is the time of the write: Progress.At defaults to it (required then).
	Now time.Time
	// LeaseUntil, when not zero, is the lease's new end (a renewal).
	LeaseUntil time.Time
	// Progress, when not nil, replaces the record's progress (its At defaults to Now).
	Progress *Progress
	// Cursor, when not nil, replaces the job's cursor (jobs.Checkpoint): Value (at most
	// MaxCursorBytes) or Pointer, Bytes, and Seq, which must be above the record's (else
	// ErrStaleCursor); its At defaults to Now.
	Cursor *Cursor
}

// Renewal extends a claim's lease.
type Renewal struct {
	// Kind, Key and JobID name the record as the claim's ClaimRequest did; Token is the claim's.
	Kind, Key, JobID, Token string
	// LeaseUntil is the lease's new end.
	LeaseUntil time.Time
}

// DeadMark asks to record a job as dead that was dead-lettered without a claim of this store
// recording it: an unknown kind, a payload mismatch, a body that is no valid envelope but names
// a job id, a middleware that refused it before it ran.
type DeadMark struct {
	// Kind, Key and JobID identify the job. Key is required. Kind may be empty only for a job
	// known by its id alone (Key == JobID): a malformed message whose kind is missing or invalid,
	// recorded under its id with no kind.
	Kind, Key, JobID string
	// PayloadHash is jobs.PayloadHash of the dead-lettered message's kind and args ("" when it
	// could not be computed). JobID or PayloadHash is required.
	PayloadHash string
	// Reason is the dead-letter reason (required); Error the error sent with it (stores
	// truncate it).
	Reason, Error string
	// MessageID is the dead-lettered SQS message, kept as the record's DeadMessageID.
	MessageID string
	// Now is the time of the write; ExpiresAt the record's new expiry (zero: never).
	Now, ExpiresAt time.Time
	// Meta is the job's envelope meta (nil when it has none), as in ClaimRequest: stores ignore
	// it, a wrapping Store may act on it.
	Meta map[string]string
}

// Store keeps job records. Implementations must be safe for concurrent use, and each method
// must be atomic: two Claims for one key never both succeed while the first's lease is live.
type Store interface {
	// Claim starts a job, with one conditional write. It succeeds when there is no record, or it
	// expired, or its state is claimable (a dead record only from another message than the one
	// that was dead-lettered), or it is running with an expired lease and no cancellation
	// request — and the payload hash matches (or the record has none). Otherwise it returns
	// Claimed false and the record.
	Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error)
	// Finish records the outcome of the claim named by f.Token. It returns ErrLeaseLost when the
	// record is no longer held with that token. A Finish to StateRetrying of a record that
	// carries a cancellation request records StateCancelled (reason "cancelled") instead and
	// returns ErrRecordedCancelled; the other states are recorded as they are (what happened).
	Finish(ctx context.Context, f Finish) error
	// Renew extends the lease of the claim named by r.Token, or returns ErrLeaseLost. It is
	// Touch with LeaseUntil alone, without the record.
	Renew(ctx context.Context, r Renewal) error
	// Touch updates the record of the running claim named by t.Token with one conditional write
	// (a lease renewal, a progress report, a cursor, or several) and returns the record after
	// the write, so
	// that the claim's holder also learns, at no extra cost, whether a cancellation of the job
	// was requested (Record.CancelRequestedAt). It does not change the record's state or
	// UpdatedAt (the time of its last state change). It returns ErrLeaseLost when the record is
	// no longer running under that token (finished, cancelled, taken over after its lease
	// ended). A Touch with a cursor whose Seq is not above the record's returns ErrStaleCursor
	// (nothing written), unless the record's cursor is that very write (an SDK retry of a write
	// whose answer was lost): then the record is returned.
	Touch(ctx context.Context, t Touch) (Record, error)
	// Get returns the record of a job key, or ErrNotFound. When the key may also be a job's id
	// whose record is kept under that id (Layout), the most recently updated of the two records is
	// returned.
	Get(ctx context.Context, kind, key string) (Record, error)
	// MarkDead records the job as dead, with one conditional write. A record of the job key that
	// is live (not expired), is this job's (the same job id, or the same payload hash: another
	// copy of the operation) and waits for a run (queued, scheduled, retrying, or running with an
	// expired lease) becomes dead: it keeps its run count; its reason, error and DeadMessageID
	// are set, its claim (token, lease) removed. Where the key has no record (none, or an expired
	// one), a new dead record is written (runs 0, the payload hash if given), so that every job
	// in the DLQ has one. It reports whether it wrote: a record of another job and a record in
	// another state (succeeded, cancelled, dead, running with a live lease) are left alone
	// (false, nil). A job whose record cannot be written returns an error wrapping
	// ErrKeyTooLong.
	MarkDead(ctx context.Context, d DeadMark) (bool, error)
}

// ClaimReader is implemented by stores that can read the record of a running claim with one
// cheap read: the middleware's cancellation checks use it (MiddlewareConfig.CancelCheck), and
// Store.Get otherwise. Both stores here implement it.
type ClaimReader interface {
	// ReadClaim returns the record the claim of (kind, key, jobID) wrote, named as the claim's
	// ClaimRequest named it, or ErrNotFound. The read may lag the latest write by about a
	// second (DynamoDBStore: one eventually consistent GetItem, half a read unit per 4 KB).
	ReadClaim(ctx context.Context, kind, key, jobID string) (Record, error)
}

// Errors stores return.
var (
	ErrNotFound  = errors.New("idempotency: no record")
	ErrLeaseLost = errors.New("idempotency: the claim is no longer held")
	// ErrRecordedCancelled is returned by a Finish to StateRetrying of a claim whose record
	// carries a cancellation request (Record.CancelRequestedAt): the job failed before its worker
	// noticed the request, and the store recorded it as cancelled instead (reason "cancelled"),
	// so that it is not run again. It wraps jobs.ErrCancelRequested.
	ErrRecordedCancelled = fmt.Errorf("idempotency: recorded as cancelled, not retrying: %w", jobs.ErrCancelRequested)
	// ErrStaleCursor is returned by a Touch whose cursor is not newer than the record's (its Seq
	// is not above the record's): a newer checkpoint was written meanwhile, and is kept.
	ErrStaleCursor = errors.New("idempotency: a newer cursor is already saved")
)

// MaxErrorBytes bounds the error text a store keeps, far below DynamoDB's 400 KB item limit.
const MaxErrorBytes = 4 << 10

// MaxResultBytes bounds a stored result (SetResult).
const MaxResultBytes = 16 << 10

// MaxProgressMessageBytes bounds a progress message: stores cut a longer one on a UTF-8
// boundary (TruncateText).
const MaxProgressMessageBytes = jobs.MaxProgressMessageBytes

// MaxCancelReasonBytes bounds the reason kept with a cancellation request (TruncateText).
const MaxCancelReasonBytes = 512

// MaxCursorBytes bounds a cursor kept on the job's record (jobs.Checkpoint): 16 KiB of JSON.
// A larger one goes to S3 when the middleware has a cursor store (MiddlewareConfig.Cursors).
// Every write to the record is billed on its size (1 write unit per KB), so a large cursor makes
// the record's later writes (lease renewals, progress, the finish) cost more: keep cursors small.
const MaxCursorBytes = 16 << 10
