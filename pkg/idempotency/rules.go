package idempotency

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// The rules every store here shares, so that MemoryStore and DynamoDBStore behave the same to
// the millisecond.
//
// Precision: stores keep times to the millisecond (truncated) and ExpiresAt to the second
// (rounded up, so a record never expires before it was asked to: DynamoDB's TTL attribute holds
// seconds).

// maxClaimRounds bounds the claim loop of a store that must re-read or replace a record (an
// expired one, or one that changed between a refused write and the read that explains it).
const maxClaimRounds = 4

// TruncateError returns s as a store keeps it: invalid UTF-8 replaced by U+FFFD (DynamoDB strings
// must be UTF-8), then cut to at most MaxErrorBytes bytes on a rune boundary.
func TruncateError(s string) string { return TruncateText(s, MaxErrorBytes) }

// TruncateText returns s as a store keeps a bounded text: invalid UTF-8 replaced by U+FFFD, then
// cut to at most n bytes on a rune boundary.
func TruncateText(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// progressScale is the precision stores keep a progress fraction at: 4 decimal places.
const progressScale = 1e4

// ValidProgress reports whether f is a progress fraction: a number from 0 to 1.
func ValidProgress(f float64) bool { return f >= 0 && f <= 1 } // false for NaN

// normalizeProgress returns p as stores keep it: the fraction at 4 decimal places, the message
// valid UTF-8 of at most MaxProgressMessageBytes, the time to the millisecond (defaulting to now).
func normalizeProgress(p Progress, now time.Time) Progress {
	p.Fraction = math.Round(p.Fraction*progressScale) / progressScale
	p.Message = TruncateText(p.Message, MaxProgressMessageBytes)
	if p.At.IsZero() {
		p.At = now
	}
	p.At = msTime(p.At)
	return p
}

func validateTouch(t *Touch) error {
	switch {
	case t.Kind == "" || t.Key == "":
		return fmt.Errorf("%w: touch without a Kind or Key", errInvalid)
	case t.Token == "":
		return fmt.Errorf("%w: touch without a token", errInvalid)
	case t.LeaseUntil.IsZero() && t.Progress == nil && t.Cursor == nil:
		return fmt.Errorf("%w: touch with nothing to write (no LeaseUntil, Progress or Cursor)", errInvalid)
	case t.Progress != nil && !ValidProgress(t.Progress.Fraction):
		return fmt.Errorf("%w: touch with progress %v (want 0 to 1)", errInvalid, t.Progress.Fraction)
	case t.Progress != nil && t.Progress.At.IsZero() && t.Now.IsZero():
		return fmt.Errorf("%w: touch with progress but neither Progress.At nor Now", errInvalid)
	case t.Cursor != nil:
		return validateCursor(t.Cursor, t.Now)
	}
	return nil
}

// validateCursor checks a cursor a Touch writes.
func validateCursor(c *Cursor, now time.Time) error {
	switch {
	case c.Seq < 1:
		return fmt.Errorf("%w: touch with cursor number %d (want ≥ 1)", errInvalid, c.Seq)
	case (c.Value == "") == (c.Pointer == ""):
		return fmt.Errorf("%w: touch with a cursor that has both or neither of a Value and a Pointer", errInvalid)
	case len(c.Value) > MaxCursorBytes:
		return fmt.Errorf("%w: touch with a cursor of %d bytes (at most %d on the record)", errInvalid, len(c.Value), MaxCursorBytes)
	case c.Value != "" && !utf8.ValidString(c.Value):
		return fmt.Errorf("%w: touch with a cursor that is not valid UTF-8", errInvalid)
	case c.Bytes < 0:
		return fmt.Errorf("%w: touch with a cursor of %d bytes", errInvalid, c.Bytes)
	case c.At.IsZero() && now.IsZero():
		return fmt.Errorf("%w: touch with a cursor but neither Cursor.At nor Now", errInvalid)
	}
	return nil
}

// normalizeCursor returns c as stores keep it: its time to the millisecond (defaulting to now),
// its size that of its value when it has one.
func normalizeCursor(c Cursor, now time.Time) Cursor {
	if c.At.IsZero() {
		c.At = now
	}
	c.At = msTime(c.At)
	if c.Value != "" {
		c.Bytes = len(c.Value)
	}
	return c
}

// unixMs returns t in unix milliseconds.
func unixMs(t time.Time) int64 { return t.UnixMilli() }

// fromMs returns the UTC time of unix milliseconds.
func fromMs(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// msTime truncates t to the millisecond (in UTC); the zero time stays zero.
func msTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return fromMs(unixMs(t))
}

// expSeconds returns the unix second of an expiry, rounded up.
func expSeconds(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// expTime rounds an expiry up to the second (in UTC); the zero time stays zero.
func expTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.Unix(expSeconds(t), 0).UTC()
}

// claimable reports whether req may claim rec (a record that exists and has not expired at
// req.Now): its state allows it, or it is running with a lease that has ended, and its payload
// hash is absent or equal.
func claimable(rec *Record, req *ClaimRequest) bool {
	// A running record whose lease has ended is taken over, unless a cancellation was requested
	// while it ran: its worker stopped (crashed, timed out) before it could record the
	// cancellation, and the middleware records it instead (Middleware.refused).
	stateOK := rec.State.Claimable() ||
		rec.State == StateRunning && !msTime(rec.LeaseUntil).After(msTime(req.Now)) && rec.CancelRequestedAt.IsZero()
	if rec.State == StateDead && req.MessageID != "" && rec.DeadMessageID == req.MessageID {
		stateOK = false // the dead-lettered message itself came back: its DLQ send failed
	}
	return stateOK && (rec.PayloadHash == "" || rec.PayloadHash == req.PayloadHash)
}

// errInvalid is the cause of the errors returned for malformed requests.
var errInvalid = errors.New("idempotency: invalid request")

func validateClaim(req *ClaimRequest) error {
	switch {
	case req.Kind == "":
		return fmt.Errorf("%w: claim without a Kind", errInvalid)
	case req.Key == "":
		return fmt.Errorf("%w: claim without a Key", errInvalid)
	case req.Token == "":
		return fmt.Errorf("%w: claim without a Token", errInvalid)
	case req.Now.IsZero():
		return fmt.Errorf("%w: claim without Now", errInvalid)
	case req.LeaseUntil.IsZero():
		return fmt.Errorf("%w: claim without LeaseUntil", errInvalid)
	case req.AttemptsBefore < 0:
		return fmt.Errorf("%w: claim with AttemptsBefore %d (want ≥ 0)", errInvalid, req.AttemptsBefore)
	}
	return nil
}

// claimRuns returns the run count of a claim over a record with runs runs (0: none).
func claimRuns(runs int, req *ClaimRequest) int { return max(runs, req.AttemptsBefore) + 1 }

func validateFinish(f *Finish) error {
	switch {
	case f.Kind == "":
		return fmt.Errorf("%w: finish without a Kind", errInvalid)
	case f.Key == "":
		return fmt.Errorf("%w: finish without a Key", errInvalid)
	case f.Token == "":
		return fmt.Errorf("%w: finish without a Token", errInvalid)
	case f.Now.IsZero():
		return fmt.Errorf("%w: finish without Now", errInvalid)
	case f.Progress != nil && !ValidProgress(f.Progress.Fraction):
		return fmt.Errorf("%w: finish with progress %v (want 0 to 1)", errInvalid, f.Progress.Fraction)
	case f.RunTime < 0:
		return fmt.Errorf("%w: finish with run time %s", errInvalid, f.RunTime)
	case f.Continue && f.NotRun:
		return fmt.Errorf("%w: finish that both continues the job and says it did not run", errInvalid)
	}
	if f.Continue {
		if f.State == StateQueued || f.State == StateScheduled {
			return nil
		}
		return fmt.Errorf("%w: a continuing finish to state %q (want queued or scheduled)", errInvalid, f.State)
	}
	switch f.State {
	case StateSucceeded, StateRetrying, StateDead, StateCancelled:
		return nil
	}
	return fmt.Errorf("%w: finish to state %q (want succeeded, retrying, dead or cancelled; queued or scheduled with Continue)", errInvalid, f.State)
}

// cancelsOnRequest reports whether a finish becomes a cancellation when the record carries a
// cancellation request: a failure to retry, or a continuation.
func (f *Finish) cancelsOnRequest() bool { return f.State == StateRetrying || f.Continue }

// Limits of what a job record can hold, from DynamoDB's (the memory store keeps the same).
const (
	// MaxIndexedIDBytes is the longest job id a record can carry where it indexes the id: AttrJobID
	// is the partition key of IndexByID, and DynamoDB's partition keys take at most 2,048 bytes.
	// A record kept under the job's id (LayoutByID, a job without a key of its own) does not index
	// it, and its partition key is a hash of a long id: there the id may be longer.
	MaxIndexedIDBytes = 2048
	// MaxIdentityBytes bounds a job's kind, key and id together (the key counted once when it is
	// the id), so that the record, with the longest error, result and cursor it may keep, stays
	// within DynamoDB's 400 KB item limit.
	MaxIdentityBytes = 400<<10 - MaxErrorBytes - MaxResultBytes - MaxCursorBytes - 4<<10
)

// ErrKeyTooLong is wrapped by the error of a Claim or MarkDead of a job whose record the store
// cannot write: a job id longer than MaxIndexedIDBytes where the record indexes it, or a kind, key
// and id longer than MaxIdentityBytes together. Only a message that no producer of this module
// wrote can carry one (the producer takes keys of at most 1,024 bytes and ids of at most 128):
// the middleware dead-letters it at once as malformed, since every claim of it would fail.
var ErrKeyTooLong = errors.New("idempotency: the job's key or id is too long for its record")

// checkSize returns an error wrapping ErrKeyTooLong when the record of the job (kind, key, jobID)
// cannot be written in layout l.
func (l Layout) checkSize(kind, key, jobID string) error {
	n := len(kind) + len(key)
	if !l.IDKeyed(key, jobID) {
		if len(jobID) > MaxIndexedIDBytes {
			return fmt.Errorf("%w: its id is %d bytes long, and the job table indexes ids of at most %d bytes (DynamoDB's partition key limit, by_id index)",
				ErrKeyTooLong, len(jobID), MaxIndexedIDBytes)
		}
		n += len(jobID)
	}
	if n > MaxIdentityBytes {
		return fmt.Errorf("%w: its kind, key and id take %d bytes, and a job record keeps at most %d of them (DynamoDB's 400 KB item limit)",
			ErrKeyTooLong, n, MaxIdentityBytes)
	}
	return nil
}

func validateDeadMark(d *DeadMark) error {
	switch {
	case d.Key == "":
		return fmt.Errorf("%w: dead mark without a Key", errInvalid)
	case d.Kind == "" && (d.JobID == "" || d.Key != d.JobID):
		return fmt.Errorf("%w: dead mark without a Kind whose Key is not its JobID", errInvalid)
	case d.JobID == "" && d.PayloadHash == "":
		return fmt.Errorf("%w: dead mark without a JobID or PayloadHash", errInvalid)
	case d.Reason == "":
		return fmt.Errorf("%w: dead mark without a Reason", errInvalid)
	case d.Now.IsZero():
		return fmt.Errorf("%w: dead mark without Now", errInvalid)
	}
	return nil
}

// markable reports whether d may make rec (a live record) dead: rec is d's job and waits for a
// run.
func markable(rec *Record, d *DeadMark) bool {
	ours := d.JobID != "" && rec.JobID == d.JobID || d.PayloadHash != "" && rec.PayloadHash == d.PayloadHash
	switch rec.State {
	case StateQueued, StateScheduled, StateRetrying:
		return ours
	case StateRunning:
		return ours && !msTime(rec.LeaseUntil).After(msTime(d.Now))
	}
	return false
}

func validateRenew(r *Renewal) error {
	switch {
	case r.Kind == "" || r.Key == "":
		return fmt.Errorf("%w: renew without a Kind or Key", errInvalid)
	case r.Token == "":
		return fmt.Errorf("%w: renew without a token", errInvalid)
	case r.LeaseUntil.IsZero():
		return fmt.Errorf("%w: renew without a lease end", errInvalid)
	}
	return nil
}

func validState(s State) bool {
	switch s {
	case StateQueued, StateScheduled, StateRunning, StateSucceeded, StateRetrying, StateDead, StateCancelled:
		return true
	}
	return false
}

// deadRecord is the record MarkDead writes where the job has none (or an expired one): dead,
// never run.
func deadRecord(d *DeadMark) Record {
	return Record{
		Kind: d.Kind, Key: d.Key, JobID: d.JobID, State: StateDead, PayloadHash: d.PayloadHash,
		LastError: TruncateError(d.Error), Reason: d.Reason, DeadMessageID: d.MessageID,
		UpdatedAt: msTime(d.Now), ExpiresAt: expTime(d.ExpiresAt),
	}
}

// freshRecord is the record of a claim over no record (or an expired one).
func freshRecord(req *ClaimRequest) Record {
	now := msTime(req.Now)
	return Record{
		Kind: req.Kind, Key: req.Key, JobID: req.JobID, State: StateRunning, Runs: claimRuns(0, req), Token: req.Token,
		LeaseUntil: msTime(req.LeaseUntil), PayloadHash: req.PayloadHash,
		FirstAttemptAt: now, LastAttemptAt: now, UpdatedAt: now, ExpiresAt: expTime(req.ExpiresAt),
	}
}

// normalize returns r with its times at the precision stores keep.
func normalize(r Record) Record {
	r.LeaseUntil = msTime(r.LeaseUntil)
	r.FirstAttemptAt = msTime(r.FirstAttemptAt)
	r.LastAttemptAt = msTime(r.LastAttemptAt)
	r.UpdatedAt = msTime(r.UpdatedAt)
	r.ExpiresAt = expTime(r.ExpiresAt)
	r.LastError = TruncateError(r.LastError)
	if !r.Progress.IsZero() {
		r.Progress = normalizeProgress(r.Progress, r.Progress.At)
	}
	r.CancelRequestedAt = msTime(r.CancelRequestedAt)
	r.CancelReason = TruncateText(r.CancelReason, MaxCancelReasonBytes)
	if r.Cursor.Seq > 0 {
		r.Cursor = normalizeCursor(r.Cursor, r.Cursor.At)
	}
	r.RunTime = r.RunTime.Truncate(time.Millisecond)
	if len(r.Result) > MaxResultBytes {
		r.Result = r.Result[:MaxResultBytes]
	}
	return r
}
