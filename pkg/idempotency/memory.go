package idempotency

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// MemoryStore is a Store that keeps records in a map, for one process: tests, local runs and
// jobstest. It has the DynamoDB store's semantics exactly, including expiry (an expired record
// counts as absent for Claim but is still returned by Get), error truncation and time precision
// (milliseconds; ExpiresAt rounded up to the second). Expired records are kept until replaced.
//
// Records are kept under the partition keys of LayoutByID, so that jobs share records exactly
// as they do in a DynamoDBStore of the default layout.
//
// The zero value is not usable; call NewMemoryStore.
type MemoryStore struct {
	mu   sync.Mutex
	recs map[string]Record // by LayoutByID.ItemKey
}

var (
	_ Store       = (*MemoryStore)(nil)
	_ ClaimReader = (*MemoryStore)(nil)
)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{recs: make(map[string]Record)} }

// Claim implements Store.
func (m *MemoryStore) Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error) {
	if err := ctx.Err(); err != nil {
		return ClaimResult{}, err
	}
	if err := validateClaim(&req); err != nil {
		return ClaimResult{}, err
	}
	if err := LayoutByID.checkSize(req.Kind, req.Key, req.JobID); err != nil {
		return ClaimResult{}, err
	}
	ik := LayoutByID.ItemKey(req.Kind, req.Key, req.JobID)
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.recs[ik]
	if !ok || old.Expired(req.Now) {
		rec := freshRecord(&req)
		m.recs[ik] = rec
		return ClaimResult{Claimed: true, Record: rec}, nil
	}
	if !claimable(&old, &req) {
		return ClaimResult{Record: old}, nil
	}
	now := msTime(req.Now)
	rec := old
	rec.Kind, rec.Key, rec.JobID = req.Kind, req.Key, req.JobID
	rec.State, rec.Token, rec.LeaseUntil = StateRunning, req.Token, msTime(req.LeaseUntil)
	rec.Reason, rec.DeadMessageID = "", "" // a dead job claimed again is no longer dead
	// A new run starts without the last run's progress or cancellation request.
	rec.Progress, rec.CancelRequestedAt, rec.CancelReason = Progress{}, time.Time{}, ""
	if req.PayloadHash != "" {
		rec.PayloadHash = req.PayloadHash
	}
	rec.Runs = claimRuns(rec.Runs, &req)
	if rec.FirstAttemptAt.IsZero() {
		rec.FirstAttemptAt = now
	}
	rec.LastAttemptAt, rec.UpdatedAt = now, now
	rec.ExpiresAt = expTime(req.ExpiresAt)
	m.recs[ik] = rec
	return ClaimResult{Claimed: true, Record: rec}, nil
}

// Finish implements Store.
func (m *MemoryStore) Finish(ctx context.Context, f Finish) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validateFinish(&f); err != nil {
		return err
	}
	ik := LayoutByID.ItemKey(f.Kind, f.Key, f.JobID)
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.recs[ik]
	if !ok || rec.State != StateRunning || rec.Token != f.Token {
		return ErrLeaseLost
	}
	var result error
	if f.cancelsOnRequest() && !rec.CancelRequestedAt.IsZero() {
		f.State, f.Reason, f.Continue, result = StateCancelled, jobs.ReasonCancelled, false, ErrRecordedCancelled
	}
	rec.State, rec.UpdatedAt, rec.ExpiresAt = f.State, msTime(f.Now), expTime(f.ExpiresAt)
	if (f.NotRun || f.Continue) && rec.Runs > 0 {
		rec.Runs--
	}
	if f.Continue {
		rec.Continuations++
	}
	rec.RunTime += f.RunTime.Truncate(time.Millisecond)
	if f.ClearCursor {
		rec.Cursor.Value, rec.Cursor.Pointer = "", ""
	}
	if f.Error != "" {
		rec.LastError = TruncateError(f.Error)
	}
	if f.Reason != "" {
		rec.Reason = f.Reason
	}
	if f.State == StateSucceeded && f.Result != "" {
		rec.Result = f.Result
	}
	rec.DeadMessageID = ""
	if f.State == StateDead {
		rec.DeadMessageID = f.MessageID
	}
	if f.Progress != nil {
		rec.Progress = normalizeProgress(*f.Progress, f.Now)
	}
	rec.Token, rec.LeaseUntil = "", time.Time{}
	m.recs[ik] = rec
	return result
}

// Renew implements Store: Touch with the lease alone.
func (m *MemoryStore) Renew(ctx context.Context, r Renewal) error {
	if err := validateRenew(&r); err != nil {
		return err
	}
	_, err := m.Touch(ctx, Touch{Kind: r.Kind, Key: r.Key, JobID: r.JobID, Token: r.Token, LeaseUntil: r.LeaseUntil})
	return err
}

// Touch implements Store.
func (m *MemoryStore) Touch(ctx context.Context, t Touch) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	if err := validateTouch(&t); err != nil {
		return Record{}, err
	}
	ik := LayoutByID.ItemKey(t.Kind, t.Key, t.JobID)
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.recs[ik]
	if !ok || rec.State != StateRunning || rec.Token != t.Token {
		return Record{}, ErrLeaseLost
	}
	if !t.LeaseUntil.IsZero() {
		rec.LeaseUntil = msTime(t.LeaseUntil)
	}
	if t.Cursor != nil {
		c := normalizeCursor(*t.Cursor, t.Now)
		if rec.Cursor.Seq >= c.Seq {
			if rec.Cursor == c {
				return rec, nil // this very write, sent again
			}
			return Record{}, ErrStaleCursor
		}
		rec.Cursor = c
	}
	if t.Progress != nil {
		rec.Progress = normalizeProgress(*t.Progress, t.Now)
	}
	m.recs[ik] = rec
	return rec, nil
}

// MarkDead implements Store.
func (m *MemoryStore) MarkDead(ctx context.Context, d DeadMark) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := validateDeadMark(&d); err != nil {
		return false, err
	}
	if err := LayoutByID.checkSize(d.Kind, d.Key, d.JobID); err != nil {
		return false, err
	}
	ik := LayoutByID.ItemKey(d.Kind, d.Key, d.JobID)
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.recs[ik]
	if !ok || rec.Expired(d.Now) {
		m.recs[ik] = deadRecord(&d)
		return true, nil
	}
	if !markable(&rec, &d) {
		return false, nil
	}
	rec.State, rec.Reason, rec.DeadMessageID = StateDead, d.Reason, d.MessageID
	if d.Error != "" {
		rec.LastError = TruncateError(d.Error)
	}
	rec.UpdatedAt, rec.ExpiresAt = msTime(d.Now), expTime(d.ExpiresAt)
	rec.Token, rec.LeaseUntil = "", time.Time{}
	m.recs[ik] = rec
	return true, nil
}

// Get implements Store. It returns expired records too: callers check Record.Expired.
func (m *MemoryStore) Get(ctx context.Context, kind, key string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.recs[ItemKey(kind, key)]
	if byID, found := m.recs[IDItemKey(key)]; found && byID.Kind == kind && byID.Key == key &&
		(!ok || byID.UpdatedAt.After(rec.UpdatedAt)) {
		rec, ok = byID, true
	}
	if !ok {
		return Record{}, ErrNotFound
	}
	return rec, nil
}

// ReadClaim implements ClaimReader.
func (m *MemoryStore) ReadClaim(ctx context.Context, kind, key, jobID string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.recs[LayoutByID.ItemKey(kind, key, jobID)]
	if !ok {
		return Record{}, ErrNotFound
	}
	return rec, nil
}

// Put writes r as it is (times at the store's precision, its error truncated), replacing any
// record of its key. It is how a producer records a queued or scheduled job, and how tests seed
// records (idempotencytest.Options.Seed).
func (m *MemoryStore) Put(ctx context.Context, r Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.Kind == "" || r.Key == "" || !validState(r.State) {
		return fmt.Errorf("%w: put of a record without a Kind, Key or valid State (%q)", errInvalid, r.State)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs[LayoutByID.ItemKey(r.Kind, r.Key, r.JobID)] = normalize(r)
	return nil
}
