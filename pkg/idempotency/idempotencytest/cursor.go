package idempotencytest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// The cases of long jobs (jobs.Checkpoint, continuations): registered with the others in init.
func init() {
	cases = append(cases,
		testCase{"CursorUnderTheClaim", cursorUnderClaim},
		testCase{"ContinueTakesBackTheRun", continueTakesBackTheRun},
		testCase{"CursorAfterTheRun", cursorAfterTheRun},
	)
}

// touchCursor writes a cursor under key's claim by token.
func (e *env) touchCursor(key, jobID, token string, c idempotency.Cursor, now time.Time) (idempotency.Record, error) {
	return e.s.Touch(e.ctx, idempotency.Touch{Kind: kind, Key: key, JobID: jobID, Token: token, Now: now, Cursor: &c})
}

// cursorUnderClaim checks Touch with a cursor: it is written under the claim's token, only with a
// number above the record's (a stale or repeated number is ErrStaleCursor, except the very same
// write sent again, which returns the record), as a value or an S3 pointer (the other removed),
// its time defaulting to Now; a claim keeps it; invalid cursors write nothing.
func cursorUnderClaim(t *testing.T, e *env) {
	t0 := at(0)
	key := e.key()
	r := req(key, "A", t0)
	want := e.mustClaim(r)

	t1 := t0.Add(time.Second + 3*time.Millisecond)
	got, err := e.touchCursor(key, r.JobID, "A", idempotency.Cursor{Value: `{"page":4}`, Seq: 1}, t1)
	if err != nil {
		t.Fatalf("Touch (cursor 1): %v", err)
	}
	want.Cursor = idempotency.Cursor{Value: `{"page":4}`, Bytes: 10, Seq: 1, At: t1}
	checkRecord(t, "Touch (cursor) returns the record after the write", got, want)
	checkRecord(t, "Get after Touch (cursor)", e.get(key), want)

	// The same write again (an SDK retry whose first answer was lost) is not an error.
	if got, err := e.touchCursor(key, r.JobID, "A", idempotency.Cursor{Value: `{"page":4}`, Seq: 1}, t1); err != nil {
		t.Errorf("the same cursor write again = %v, want the record", err)
	} else {
		checkRecord(t, "the same cursor write again", got, want)
	}
	// A stale number, or the same number with another value, is refused and writes nothing.
	for name, c := range map[string]idempotency.Cursor{
		"same-number": {Value: `{"page":3}`, Seq: 1},
		"lower":       {Value: `{"page":9}`, Seq: 1, At: t0},
	} {
		if _, err := e.touchCursor(key, r.JobID, "A", c, t1.Add(time.Second)); !errors.Is(err, idempotency.ErrStaleCursor) {
			t.Errorf("Touch with a %s cursor = %v, want ErrStaleCursor", name, err)
		}
	}
	checkRecord(t, "Get after refused cursors (want unchanged)", e.get(key), want)

	// A pointer replaces the value, with the size the caller says; a value replaces the pointer.
	t2 := t0.Add(2 * time.Second)
	ptr := `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"k/cursor/2-A"}]`
	got, err = e.touchCursor(key, r.JobID, "A", idempotency.Cursor{Pointer: ptr, Bytes: 40000, Seq: 2}, t2)
	if err != nil {
		t.Fatalf("Touch (pointer): %v", err)
	}
	want.Cursor = idempotency.Cursor{Pointer: ptr, Bytes: 40000, Seq: 2, At: t2}
	checkRecord(t, "Touch with a pointer", got, want)
	t3 := t0.Add(3 * time.Second)
	big := `"` + strings.Repeat("x", idempotency.MaxCursorBytes-2) + `"`
	got, err = e.touchCursor(key, r.JobID, "A", idempotency.Cursor{Value: big, Seq: 5, At: t3.Add(-time.Millisecond)}, t3)
	if err != nil {
		t.Fatalf("Touch (a cursor of MaxCursorBytes): %v", err)
	}
	want.Cursor = idempotency.Cursor{Value: big, Bytes: idempotency.MaxCursorBytes, Seq: 5, At: t3.Add(-time.Millisecond)}
	checkRecord(t, "Touch with a cursor of MaxCursorBytes, numbered with a gap, its own time", got, want)

	// Another token is a lost claim, whatever the number.
	if _, err := e.touchCursor(key, r.JobID, "X", idempotency.Cursor{Value: "1", Seq: 99}, t3); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Errorf("Touch (cursor) with another token = %v, want ErrLeaseLost", err)
	}
	// Invalid cursors are errors (not lost claims, not stale) and write nothing.
	for name, c := range map[string]idempotency.Cursor{
		"no-number":  {Value: "1"},
		"empty":      {Seq: 9},
		"both":       {Value: "1", Pointer: ptr, Seq: 9},
		"too-large":  {Value: big + " ", Seq: 9},
		"bad-utf8":   {Value: "\"\xff\"", Seq: 9},
		"negative":   {Pointer: ptr, Bytes: -1, Seq: 9},
		"no-time":    {Value: "1", Seq: 9},
		"lease-only": {},
	} {
		now := t3
		if name == "no-time" {
			now = time.Time{}
		}
		tch := idempotency.Touch{Kind: kind, Key: key, JobID: r.JobID, Token: "A", Now: now, Cursor: &c}
		if name == "lease-only" {
			tch.Cursor = nil
			tch.LeaseUntil = t3.Add(time.Hour)
			if _, err := e.s.Touch(e.ctx, tch); err != nil {
				t.Errorf("Touch (lease only) = %v", err)
			}
			want.LeaseUntil = tch.LeaseUntil
			continue
		}
		if _, err := e.s.Touch(e.ctx, tch); err == nil || errors.Is(err, idempotency.ErrLeaseLost) || errors.Is(err, idempotency.ErrStaleCursor) {
			t.Errorf("Touch with a %s cursor = %v, want an invalid-request error", name, err)
		}
	}
	checkRecord(t, "Get after invalid cursors (a lease touch alone changes the lease; the cursor stays)", e.get(key), want)

	// A failure keeps the cursor; the next claim returns it, and the numbers go on from it.
	f := fin(key, "A", idempotency.StateRetrying, t0.Add(4*time.Second))
	f.JobID, f.Error = r.JobID, "boom"
	e.finish(f)
	rec := e.mustClaim(req(key, "B", t0.Add(5*time.Second)))
	if rec.Cursor != want.Cursor {
		t.Errorf("the claim after a failure returned cursor %+v, want %+v", rec.Cursor, want.Cursor)
	}
	if _, err := e.touchCursor(key, r.JobID, "B", idempotency.Cursor{Value: "6", Seq: 6}, t0.Add(6*time.Second)); err != nil {
		t.Errorf("the next claim's cursor 6: %v", err)
	}
}

// continueTakesBackTheRun checks a Finish with Continue: the record becomes queued (a slice that
// ended) or scheduled (a sleep), its claim's run is taken back in the same write (a continuation
// is no attempt), its continuations grow by one, its run time by the run's, and its cursor stays;
// the next claim counts the same attempt again. With a cancellation request the finish is
// recorded cancelled instead. A Continue to another state, or with NotRun, is invalid.
func continueTakesBackTheRun(t *testing.T, e *env) {
	t0 := at(0)
	key := e.key()
	r := req(key, "A", t0)
	r.AttemptsBefore = 2
	e.mustClaim(r) // attempt 3
	if _, err := e.touchCursor(key, r.JobID, "A", idempotency.Cursor{Value: "100", Seq: 1}, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	f := fin(key, "A", idempotency.StateQueued, t0.Add(2*time.Second))
	f.JobID, f.Continue, f.RunTime = r.JobID, true, 1500*time.Millisecond+700*time.Microsecond
	e.finish(f)
	rec := e.get(key)
	if rec.State != idempotency.StateQueued || rec.Runs != 2 || rec.Continuations != 1 || rec.RunTime != 1500*time.Millisecond ||
		rec.Cursor.Value != "100" || rec.Token != "" || !rec.LeaseUntil.IsZero() {
		t.Errorf("after a continuing finish: %+v; want queued, runs 2, continuations 1, run time 1.5s, cursor 100, no claim", rec)
	}
	r2 := req(key, "B", t0.Add(3*time.Second))
	r2.AttemptsBefore = 2 // the copy carries the same attempts_before
	if got := e.mustClaim(r2); got.Runs != 3 || got.Cursor.Value != "100" || got.Continuations != 1 || got.RunTime != 1500*time.Millisecond {
		t.Errorf("the continued claim: runs %d, cursor %q, continuations %d, run time %s; want attempt 3 again, the cursor and the counts",
			got.Runs, got.Cursor.Value, got.Continuations, got.RunTime)
	}
	f = fin(key, "B", idempotency.StateScheduled, t0.Add(4*time.Second))
	f.JobID, f.Continue, f.RunAt, f.RunTime = r.JobID, true, t0.Add(time.Hour), 500*time.Millisecond
	e.finish(f)
	if rec := e.get(key); rec.State != idempotency.StateScheduled || rec.Runs != 2 || rec.Continuations != 2 || rec.RunTime != 2*time.Second {
		t.Errorf("after a sleeping finish: %+v; want scheduled, runs 2, continuations 2, run time 2s", rec)
	}

	// A cancellation requested while the run went on: recorded cancelled, not continued.
	key2 := e.key()
	rec2 := claimed(req(key2, "A", t0))
	rec2.CancelRequestedAt = t0.Add(time.Second)
	if e.opts.Seed != nil {
		e.seed(rec2)
		f := fin(key2, "A", idempotency.StateQueued, t0.Add(2*time.Second))
		f.JobID, f.Continue = rec2.JobID, true
		if err := e.s.Finish(e.ctx, f); !errors.Is(err, idempotency.ErrRecordedCancelled) {
			t.Errorf("a continuing finish of a record asked to cancel = %v, want ErrRecordedCancelled", err)
		}
		if got := e.get(key2); got.State != idempotency.StateCancelled || got.Continuations != 0 {
			t.Errorf("after it: state %s, continuations %d; want cancelled, none counted", got.State, got.Continuations)
		}
	}

	// Invalid continuing finishes write nothing.
	key3 := e.key()
	r3 := req(key3, "A", t0)
	e.mustClaim(r3)
	for name, f := range map[string]idempotency.Finish{
		"to-retrying":  {State: idempotency.StateRetrying, Continue: true},
		"to-succeeded": {State: idempotency.StateSucceeded, Continue: true},
		"with-not-run": {State: idempotency.StateQueued, Continue: true, NotRun: true},
		"no-continue":  {State: idempotency.StateQueued},
		"negative-run": {State: idempotency.StateRetrying, RunTime: -time.Second},
	} {
		f.Kind, f.Key, f.JobID, f.Token, f.Now = kind, key3, r3.JobID, "A", t0.Add(time.Second)
		if err := e.s.Finish(e.ctx, f); err == nil || errors.Is(err, idempotency.ErrLeaseLost) {
			t.Errorf("Finish %s = %v, want an invalid-request error", name, err)
		}
	}
	if got := e.get(key3); got.State != idempotency.StateRunning || got.Token != "A" {
		t.Errorf("after invalid finishes: %s under %q, want still running under A", got.State, got.Token)
	}
}

// cursorAfterTheRun checks what the end of a job does to its cursor: a success with ClearCursor
// removes the value and keeps its number, time and size; a failure with ClearCursor (a restart)
// too, and the next claim finds no cursor; a dead job keeps its cursor (a redrive goes on from
// it).
func cursorAfterTheRun(t *testing.T, e *env) {
	t0 := at(0)
	for _, tt := range []struct {
		name  string
		state idempotency.State
		clear bool
	}{
		{"succeeded", idempotency.StateSucceeded, true},
		{"restart", idempotency.StateRetrying, true},
		{"dead", idempotency.StateDead, false},
	} {
		key := e.key()
		r := req(key, "A", t0)
		e.mustClaim(r)
		if _, err := e.touchCursor(key, r.JobID, "A", idempotency.Cursor{Value: `"abc"`, Seq: 3}, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		f := fin(key, "A", tt.state, t0.Add(2*time.Second))
		f.JobID, f.ClearCursor, f.RunTime = r.JobID, tt.clear, time.Second
		if tt.state != idempotency.StateSucceeded {
			f.Error, f.Reason = "boom", map[bool]string{true: "", false: "exhausted"}[tt.clear]
		}
		e.finish(f)
		rec := e.get(key)
		wantValue := map[bool]string{true: "", false: `"abc"`}[tt.clear]
		if rec.Cursor.Value != wantValue || rec.Cursor.Seq != 3 || rec.Cursor.Bytes != 5 || !rec.Cursor.At.Equal(t0.Add(time.Second)) || rec.RunTime != time.Second {
			t.Errorf("%s: cursor %+v, run time %s; want value %q, number 3, 5 bytes, its time, 1s", tt.name, rec.Cursor, rec.RunTime, wantValue)
		}
		if tt.state == idempotency.StateSucceeded {
			continue
		}
		got := e.mustClaim(req(key, "B", t0.Add(3*time.Second)))
		if got.Cursor.Value != wantValue || got.Cursor.Saved() == tt.clear {
			t.Errorf("%s: the next claim found cursor %+v, want value %q", tt.name, got.Cursor, wantValue)
		}
	}
}
