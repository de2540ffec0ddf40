// Package idempotencytest checks that an idempotency.Store keeps the package's contract, in the
// spirit of testing/slogtest: run it from a test of your store.
//
//	func TestConformance(t *testing.T) {
//		idempotencytest.Run(t, func(t *testing.T) idempotency.Store { return newMyStore(t) })
//	}
//
// The suite drives records into every state with Claim and Finish only, so any store can run it;
// the queued and scheduled states, which only a producer writes, need Options.Seed. Every case
// runs twice: as written, and again (under "FreshHint/") with ClaimRequest.Fresh set on every
// claim, which must not change any result: the hint is only allowed to make claims cheaper. All times are
// explicit (ClaimRequest.Now, …) and lie in the future (2050), so nothing sleeps and no real
// expiry (such as DynamoDB's TTL deletion) interferes.
//
// Precision the suite expects: times kept to the millisecond, ExpiresAt to the second; error text
// cut to idempotency.MaxErrorBytes on a UTF-8 boundary and stored as valid UTF-8.
package idempotencytest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// Options tunes RunWithOptions. The zero value runs every case that needs only the Store
// interface.
type Options struct {
	// Seed writes r into s as it is, replacing any record of its key (MemoryStore.Put and
	// DynamoDBStore.Put do). It lets the suite claim queued and scheduled records, which Claim and
	// Finish cannot produce. Optional: without it, those two cases are skipped.
	Seed func(t *testing.T, s idempotency.Store, r idempotency.Record)
}

// Run runs the conformance suite with the zero Options.
func Run(t *testing.T, newStore func(t *testing.T) idempotency.Store) {
	t.Helper()
	RunWithOptions(t, newStore, Options{})
}

// RunWithOptions runs the conformance suite. Every case is a parallel subtest that calls
// newStore (concurrently) and uses job keys of its own, so newStore may return one shared store.
func RunWithOptions(t *testing.T, newStore func(t *testing.T) idempotency.Store, opts Options) {
	t.Helper()
	nonce := strconv.FormatInt(time.Now().UnixNano(), 36) // keys unique across runs on a persistent store
	for _, fresh := range []bool{false, true} {
		for _, c := range cases {
			name := c.name
			if fresh {
				name = "FreshHint/" + name
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				c.run(t, &env{t: t, s: newStore(t), opts: opts, fresh: fresh, nonce: nonce, ctx: context.Background()})
			})
		}
	}
}

// T0 is the suite's clock origin; every time the suite uses is derived from it.
var T0 = time.Date(2050, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	kind  = "conformance.test"
	hash1 = "hash-1"
	hash2 = "hash-2"
	lease = time.Minute
)

// at returns T0 plus d.
func at(d time.Duration) time.Time { return T0.Add(d) }

type env struct {
	t     *testing.T
	s     idempotency.Store
	opts  Options
	fresh bool // set ClaimRequest.Fresh on every claim
	nonce string
	ctx   context.Context
	n     int
}

// key returns a job key unique to this subtest (and run).
func (e *env) key() string {
	e.n++
	return e.t.Name() + "/" + e.nonce + "/" + strconv.Itoa(e.n)
}

// req is a claim of key by token at now with the suite's defaults: hash1, a one-minute lease, an
// expiry a day later (on a whole second).
func req(key, token string, now time.Time) idempotency.ClaimRequest {
	return idempotency.ClaimRequest{
		Kind: kind, Key: key, JobID: "job-" + token, PayloadHash: hash1, Token: token,
		Now: now, LeaseUntil: now.Add(lease), ExpiresAt: now.Truncate(time.Second).Add(24 * time.Hour),
	}
}

func (e *env) claim(r idempotency.ClaimRequest) idempotency.ClaimResult {
	e.t.Helper()
	r.Fresh = r.Fresh || e.fresh
	res, err := e.s.Claim(e.ctx, r)
	if err != nil {
		e.t.Fatalf("Claim(%s, token %s): %v", r.Key, r.Token, err)
	}
	return res
}

func (e *env) mustClaim(r idempotency.ClaimRequest) idempotency.Record {
	e.t.Helper()
	res := e.claim(r)
	if !res.Claimed {
		e.t.Fatalf("Claim(%s, token %s) refused by %+v", r.Key, r.Token, res.Record)
	}
	return res.Record
}

func (e *env) finish(f idempotency.Finish) {
	e.t.Helper()
	if err := e.s.Finish(e.ctx, f); err != nil {
		e.t.Fatalf("Finish(%s, token %s, %s): %v", f.Key, f.Token, f.State, err)
	}
}

func (e *env) get(key string) idempotency.Record {
	e.t.Helper()
	rec, err := e.s.Get(e.ctx, kind, key)
	if err != nil {
		e.t.Fatalf("Get(%s): %v", key, err)
	}
	return rec
}

func (e *env) seed(r idempotency.Record) {
	e.t.Helper()
	if e.opts.Seed == nil {
		e.t.Skip("skipped: reaching this state needs Options.Seed, a store-specific way to write a record, and none was given")
	}
	e.opts.Seed(e.t, e.s, r)
}

// fin is a Finish of key's claim by token at now, expiring a day later.
func fin(key, token string, state idempotency.State, now time.Time) idempotency.Finish {
	return idempotency.Finish{Kind: kind, Key: key, Token: token, State: state, Now: now,
		ExpiresAt: now.Truncate(time.Second).Add(24 * time.Hour)}
}

// checkRecord reports every field of got that differs from want.
func checkRecord(t *testing.T, what string, got, want idempotency.Record) {
	t.Helper()
	var diffs []string
	str := func(name, g, w string) {
		if g != w {
			diffs = append(diffs, fmt.Sprintf("%s = %q, want %q", name, g, w))
		}
	}
	tm := func(name string, g, w time.Time) {
		if !g.Equal(w) {
			diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", name, g, w))
		}
	}
	str("Kind", got.Kind, want.Kind)
	str("Key", got.Key, want.Key)
	str("JobID", got.JobID, want.JobID)
	str("State", string(got.State), string(want.State))
	if got.Runs != want.Runs {
		diffs = append(diffs, fmt.Sprintf("Runs = %d, want %d", got.Runs, want.Runs))
	}
	str("Token", got.Token, want.Token)
	tm("LeaseUntil", got.LeaseUntil, want.LeaseUntil)
	str("PayloadHash", got.PayloadHash, want.PayloadHash)
	str("LastError", got.LastError, want.LastError)
	str("Reason", got.Reason, want.Reason)
	str("DeadMessageID", got.DeadMessageID, want.DeadMessageID)
	tm("FirstAttemptAt", got.FirstAttemptAt, want.FirstAttemptAt)
	tm("LastAttemptAt", got.LastAttemptAt, want.LastAttemptAt)
	tm("UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	tm("ExpiresAt", got.ExpiresAt, want.ExpiresAt)
	if got.Progress.Fraction != want.Progress.Fraction {
		diffs = append(diffs, fmt.Sprintf("Progress.Fraction = %v, want %v", got.Progress.Fraction, want.Progress.Fraction))
	}
	str("Progress.Message", got.Progress.Message, want.Progress.Message)
	tm("Progress.At", got.Progress.At, want.Progress.At)
	tm("CancelRequestedAt", got.CancelRequestedAt, want.CancelRequestedAt)
	str("CancelReason", got.CancelReason, want.CancelReason)
	str("Cursor.Value", got.Cursor.Value, want.Cursor.Value)
	str("Cursor.Pointer", got.Cursor.Pointer, want.Cursor.Pointer)
	if got.Cursor.Seq != want.Cursor.Seq || got.Cursor.Bytes != want.Cursor.Bytes {
		diffs = append(diffs, fmt.Sprintf("Cursor #%d of %d bytes, want #%d of %d", got.Cursor.Seq, got.Cursor.Bytes, want.Cursor.Seq, want.Cursor.Bytes))
	}
	tm("Cursor.At", got.Cursor.At, want.Cursor.At)
	if got.Continuations != want.Continuations || got.RunTime != want.RunTime {
		diffs = append(diffs, fmt.Sprintf("Continuations %d, RunTime %s; want %d, %s", got.Continuations, got.RunTime, want.Continuations, want.RunTime))
	}
	if len(diffs) > 0 {
		t.Errorf("%s:\n\t%s", what, strings.Join(diffs, "\n\t"))
	}
}

// claimed is the record a claim by r over no record makes.
func claimed(r idempotency.ClaimRequest) idempotency.Record {
	return idempotency.Record{
		Kind: r.Kind, Key: r.Key, JobID: r.JobID, State: idempotency.StateRunning, Runs: 1, Token: r.Token,
		LeaseUntil: r.LeaseUntil, PayloadHash: r.PayloadHash,
		FirstAttemptAt: r.Now, LastAttemptAt: r.Now, UpdatedAt: r.Now, ExpiresAt: r.ExpiresAt,
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, e *env)
}

var cases = []testCase{
	{"ClaimWithoutRecord", claimWithoutRecord},
	{"ClaimByState", claimByState},
	{"ExpiredRecordCountsAsAbsent", expiredRecord},
	{"PayloadMismatch", payloadMismatch},
	{"RunsGrowAcrossFailures", runsGrow},
	{"AttemptsBeforeCountsAsRuns", attemptsBefore},
	{"NotRunTakesBackTheRun", notRun},
	{"MarkDead", markDead},
	{"WrongTokenLosesLease", wrongToken},
	{"LeaseTakeover", leaseTakeover},
	{"RenewExtendsLease", renewExtends},
	{"TouchUnderTheClaim", touchUnderClaim},
	{"TouchReturnsCancelRequest", touchReturnsCancelRequest},
	{"CancelRequestWhileRunning", cancelRequestWhileRunning},
	{"GetReturnsWhatWasWritten", getRoundTrip},
	{"ErrorTruncated", errorTruncated},
	{"ConcurrentClaimsOneWinner", concurrentClaims},
	{"GetUnknownKey", getUnknown},
	{"DeadRefusesItsOwnMessage", deadRefusesItsOwnMessage},
	{"KeysScopedByKind", keysScopedByKind},
	{"LongKey", longKey},
	{"InvalidRequests", invalidRequests},
	{"JobKeyedByItsID", idKeyed},
}

// idKeyed drives a job whose key is its id (ClaimRequest.JobID == Key, as for every job enqueued
// without a key), whose record a store may keep under the id (idempotency.Layout): every
// operation that names the job with its id finds the record.
func idKeyed(t *testing.T, e *env) {
	t0 := at(0)
	byID := func(key, token string, now time.Time) idempotency.ClaimRequest {
		r := req(key, token, now)
		r.JobID = key
		return r
	}
	finID := func(key, token string, state idempotency.State, now time.Time) idempotency.Finish {
		f := fin(key, token, state, now)
		f.JobID = key
		return f
	}
	sub := func(name string, run func(t *testing.T, e *env)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run(t, &env{t: t, s: e.s, opts: e.opts, fresh: e.fresh, nonce: e.nonce, ctx: e.ctx})
		})
	}
	sub("SucceedsOnceThenDuplicate", func(t *testing.T, e *env) {
		key := "id-" + e.key()
		r := byID(key, "A", t0)
		checkRecord(t, "claim result", e.mustClaim(r), claimed(r))
		checkRecord(t, "Get after claim", e.get(key), claimed(r))
		lease := t0.Add(time.Hour)
		if err := e.s.Renew(e.ctx, idempotency.Renewal{Kind: kind, Key: key, JobID: key, Token: "A", LeaseUntil: lease}); err != nil {
			t.Fatalf("Renew: %v", err)
		}
		if got := e.get(key); !got.LeaseUntil.Equal(lease) {
			t.Errorf("after Renew: lease %v, want %v", got.LeaseUntil, lease)
		}
		e.finish(finID(key, "A", idempotency.StateSucceeded, t0.Add(time.Second)))
		got := e.get(key)
		if got.State != idempotency.StateSucceeded || got.JobID != key || got.Key != key || got.Kind != kind || got.Token != "" {
			t.Errorf("after Finish: %+v", got)
		}
		res := e.claim(byID(key, "B", t0.Add(2*time.Second)))
		if res.Claimed || res.Record.State != idempotency.StateSucceeded || res.Record.JobID != key {
			t.Errorf("a duplicate delivery: claimed %v, record %+v; want refused by the succeeded record", res.Claimed, res.Record)
		}
	})
	sub("RetriesCountRuns", func(t *testing.T, e *env) {
		key := "id-" + e.key()
		e.mustClaim(byID(key, "A", t0))
		f := finID(key, "A", idempotency.StateRetrying, t0.Add(time.Second))
		f.Error = "boom"
		e.finish(f)
		rec := e.mustClaim(byID(key, "B", t0.Add(2*time.Second)))
		if rec.Runs != 2 || rec.LastError != "boom" || !rec.FirstAttemptAt.Equal(t0) || !rec.LastAttemptAt.Equal(t0.Add(2*time.Second)) {
			t.Errorf("second claim: %+v; want runs 2, the first failure kept, first at t0, last at t0+2s", rec)
		}
		// A claim taken over after its lease ended: the old token can neither renew nor finish.
		taken := e.mustClaim(byID(key, "C", t0.Add(2*time.Second+lease)))
		if taken.Runs != 3 {
			t.Errorf("takeover: runs %d, want 3", taken.Runs)
		}
		if err := e.s.Finish(e.ctx, finID(key, "B", idempotency.StateSucceeded, t0.Add(3*time.Minute))); !errors.Is(err, idempotency.ErrLeaseLost) {
			t.Errorf("Finish by the old token = %v, want ErrLeaseLost", err)
		}
		if err := e.s.Renew(e.ctx, idempotency.Renewal{Kind: kind, Key: key, JobID: key, Token: "B", LeaseUntil: t0.Add(time.Hour)}); !errors.Is(err, idempotency.ErrLeaseLost) {
			t.Errorf("Renew by the old token = %v, want ErrLeaseLost", err)
		}
	})
	sub("PayloadMismatch", func(t *testing.T, e *env) {
		key := "id-" + e.key()
		e.mustClaim(byID(key, "A", t0))
		e.finish(finID(key, "A", idempotency.StateSucceeded, t0.Add(time.Second)))
		other := byID(key, "B", t0.Add(2*time.Second))
		other.PayloadHash = hash2
		if res := e.claim(other); res.Claimed || res.Record.PayloadHash != hash1 {
			t.Errorf("another payload under the id: claimed %v, record %+v", res.Claimed, res.Record)
		}
	})
	sub("ExpiredCountsAsAbsent", func(t *testing.T, e *env) {
		key := "id-" + e.key()
		e.mustClaim(byID(key, "A", t0))
		f := finID(key, "A", idempotency.StateSucceeded, t0.Add(time.Second))
		f.ExpiresAt = t0.Add(10 * time.Second)
		e.finish(f)
		r := byID(key, "B", t0.Add(10*time.Second))
		checkRecord(t, "claim over an expired record", e.mustClaim(r), claimed(r))
	})
	sub("MarkDead", func(t *testing.T, e *env) {
		key := "id-" + e.key()
		e.seed(idempotency.Record{Kind: kind, Key: key, JobID: key, State: idempotency.StateQueued, PayloadHash: hash1,
			UpdatedAt: t0, ExpiresAt: t0.Add(24 * time.Hour)})
		if got := e.get(key); got.State != idempotency.StateQueued || got.JobID != key {
			t.Fatalf("seeded record: %+v", got)
		}
		marked, err := e.s.MarkDead(e.ctx, idempotency.DeadMark{Kind: kind, Key: key, JobID: key, Reason: "unknown_kind",
			MessageID: "msg-dead", Now: t0.Add(time.Second)})
		if err != nil || !marked {
			t.Fatalf("MarkDead = %v, %v; want marked", marked, err)
		}
		if got := e.get(key); got.State != idempotency.StateDead || got.Reason != "unknown_kind" {
			t.Errorf("after MarkDead: %+v", got)
		}
		redriven := byID(key, "R", t0.Add(2*time.Second))
		redriven.MessageID = "msg-redriven"
		if rec := e.mustClaim(redriven); rec.Runs != 1 {
			t.Errorf("redriven claim: runs %d, want 1", rec.Runs)
		}
	})
}

func claimWithoutRecord(t *testing.T, e *env) {
	t.Run("WithExpiry", func(t *testing.T) {
		e := *e
		e.t = t
		r := req(e.key(), "A", at(1500*time.Millisecond))
		res := e.claim(r)
		if !res.Claimed {
			t.Fatalf("not claimed: %+v", res.Record)
		}
		checkRecord(t, "claim result", res.Record, claimed(r))
		checkRecord(t, "Get after claim", e.get(r.Key), claimed(r))
	})
	t.Run("WithoutExpiry", func(t *testing.T) {
		e := *e
		e.t = t
		r := req(e.key(), "A", at(time.Second))
		r.ExpiresAt = time.Time{}
		checkRecord(t, "claim result", e.mustClaim(r), claimed(r))
		rec := e.get(r.Key)
		if !rec.ExpiresAt.IsZero() || rec.Expired(at(100*365*24*time.Hour)) {
			t.Errorf("a record without expiry has ExpiresAt %v", rec.ExpiresAt)
		}
	})
}

func claimByState(t *testing.T, e *env) {
	t0 := at(0)
	fail := func(state idempotency.State, reason string) func(e *env, key string) {
		return func(e *env, key string) {
			e.mustClaim(req(key, "A", t0))
			f := fin(key, "A", state, t0.Add(time.Second))
			f.Error, f.Reason = "boom", reason
			e.finish(f)
		}
	}
	seed := func(state idempotency.State) func(e *env, key string) {
		return func(e *env, key string) {
			e.seed(idempotency.Record{Kind: kind, Key: key, JobID: "job-producer", State: state,
				PayloadHash: hash1, UpdatedAt: t0, ExpiresAt: t0.Add(24 * time.Hour)})
		}
	}
	running := func(e *env, key string) { e.mustClaim(req(key, "A", t0)) }
	tests := []struct {
		name      string
		setup     func(e *env, key string)
		now       time.Time
		claimed   bool
		runs      int
		state     idempotency.State // of the refusing record
		firstAt   time.Time         // of the claimed record
		lastError string            // of the claimed record
	}{
		{name: "queued", setup: seed(idempotency.StateQueued), now: t0.Add(time.Minute), claimed: true, runs: 1, firstAt: t0.Add(time.Minute)},
		{name: "scheduled", setup: seed(idempotency.StateScheduled), now: t0.Add(time.Minute), claimed: true, runs: 1, firstAt: t0.Add(time.Minute)},
		{name: "retrying", setup: fail(idempotency.StateRetrying, ""), now: t0.Add(2 * time.Second), claimed: true, runs: 2, firstAt: t0, lastError: "boom"},
		{name: "dead", setup: fail(idempotency.StateDead, "exhausted"), now: t0.Add(2 * time.Second), claimed: true, runs: 2, firstAt: t0, lastError: "boom"},
		{name: "cancelled", setup: fail(idempotency.StateCancelled, "cancelled"), now: t0.Add(2 * time.Second), runs: 1, state: idempotency.StateCancelled},
		{name: "succeeded", setup: func(e *env, key string) {
			e.mustClaim(req(key, "A", t0))
			e.finish(fin(key, "A", idempotency.StateSucceeded, t0.Add(time.Second)))
		}, now: t0.Add(2 * time.Second), runs: 1, state: idempotency.StateSucceeded},
		{name: "running/lease-live", setup: running, now: t0.Add(lease - time.Millisecond), runs: 1, state: idempotency.StateRunning},
		{name: "running/lease-ended", setup: running, now: t0.Add(lease), claimed: true, runs: 2, firstAt: t0},
		{name: "running/lease-long-ended", setup: running, now: t0.Add(time.Hour), claimed: true, runs: 2, firstAt: t0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := &env{t: t, s: e.s, opts: e.opts, fresh: e.fresh, nonce: e.nonce, ctx: e.ctx}
			key := e.key()
			tt.setup(e, key)
			before := e.get(key)
			r := req(key, "B", tt.now)
			res := e.claim(r)
			if res.Claimed != tt.claimed {
				t.Fatalf("Claimed = %v, want %v (record %+v)", res.Claimed, tt.claimed, res.Record)
			}
			if !tt.claimed {
				checkRecord(t, "refusing record (want the stored one)", res.Record, before)
				if res.Record.State != tt.state || res.Record.Runs != tt.runs {
					t.Errorf("refused by state %s runs %d, want %s runs %d", res.Record.State, res.Record.Runs, tt.state, tt.runs)
				}
				checkRecord(t, "Get after refused claim (want unchanged)", e.get(key), before)
				return
			}
			// A claim clears what only a dead record says (its reason, the dead-lettered message):
			// a dead job claimed again (redriven) is no longer dead. Its last error stays.
			want := claimed(r)
			want.Runs, want.FirstAttemptAt, want.LastError = tt.runs, tt.firstAt, tt.lastError
			checkRecord(t, "claim result", res.Record, want)
			checkRecord(t, "Get after claim", e.get(key), want)
		})
	}
}

func expiredRecord(t *testing.T, e *env) {
	t0 := at(0)
	exp := t0.Add(10 * time.Second)
	finished := func(state idempotency.State) func(e *env, key string) {
		return func(e *env, key string) {
			e.mustClaim(req(key, "A", t0))
			f := fin(key, "A", state, t0.Add(time.Second))
			f.ExpiresAt = exp
			if state != idempotency.StateSucceeded {
				f.Error, f.Reason = "old failure", "old-reason"
			}
			e.finish(f)
		}
	}
	tests := []struct {
		name  string
		setup func(e *env, key string)
	}{
		{"succeeded", finished(idempotency.StateSucceeded)},
		{"cancelled", finished(idempotency.StateCancelled)},
		{"retrying", finished(idempotency.StateRetrying)},
		{"dead", finished(idempotency.StateDead)},
		{"running/lease-live", func(e *env, key string) {
			r := req(key, "A", t0)
			r.LeaseUntil, r.ExpiresAt = t0.Add(time.Hour), exp
			e.mustClaim(r)
		}},
	}
	for _, tt := range tests {
		for _, h := range []struct{ name, hash string }{{"same-hash", hash1}, {"other-hash", hash2}} {
			t.Run(tt.name+"/"+h.name, func(t *testing.T) {
				t.Parallel()
				e := &env{t: t, s: e.s, opts: e.opts, fresh: e.fresh, nonce: e.nonce, ctx: e.ctx}
				key := e.key()
				tt.setup(e, key)
				before := e.get(key)
				if before.Expired(exp.Add(-time.Millisecond)) || !before.Expired(exp) {
					t.Fatalf("Get: ExpiresAt %v, want %v", before.ExpiresAt, exp)
				}
				// Just before the expiry, the old record still counts (a different hash is refused).
				early := req(key, "B", exp.Add(-time.Millisecond))
				early.PayloadHash = hash2
				if res := e.claim(early); res.Claimed {
					t.Fatalf("claim before the expiry won over %s", before.State)
				}
				// At the expiry, the record counts as absent: runs restart at 1, and its hash, error
				// and reason are gone, even when the old state was claimable.
				r := req(key, "C", exp)
				r.PayloadHash = h.hash
				res := e.claim(r)
				if !res.Claimed {
					t.Fatalf("claim of an expired record refused: %+v", res.Record)
				}
				checkRecord(t, "claim over an expired record", res.Record, claimed(r))
				checkRecord(t, "Get after the claim", e.get(key), claimed(r))
				if before.State == idempotency.StateRunning {
					if err := e.s.Finish(e.ctx, fin(key, "A", idempotency.StateSucceeded, exp)); !errors.Is(err, idempotency.ErrLeaseLost) {
						t.Errorf("Finish by the expired record's token = %v, want ErrLeaseLost", err)
					}
				}
			})
		}
	}
}

func payloadMismatch(t *testing.T, e *env) {
	t0 := at(0)
	t.Run("DifferentHashRefused", func(t *testing.T) {
		e := &env{t: t, s: e.s, opts: e.opts, fresh: e.fresh, nonce: e.nonce, ctx: e.ctx}
		key := e.key()
		e.mustClaim(req(key, "A", t0))
		e.finish(fin(key, "A", idempotency.StateRetrying, t0.Add(time.Second)))
		before := e.get(key)
		r := req(key, "B", t0.Add(2*time.Second))
		r.PayloadHash = hash2
		res := e.claim(r)
		if res.Claimed {
			t.Fatal("claim with a different payload hash won")
		}
		checkRecord(t, "refusing record", res.Record, before)
		if res.Record.PayloadHash != hash1 {
			t.Errorf("refusing record's hash %q, want %q", res.Record.PayloadHash, hash1)
		}
		checkRecord(t, "Get (want unchanged)", e.get(key), before)
	})
	t.Run("EmptyRecordHashAcceptsAny", func(t *testing.T) {
		e := &env{t: t, s: e.s, opts: e.opts, fresh: e.fresh, nonce: e.nonce, ctx: e.ctx}
		key := e.key()
		r := req(key, "A", t0)
		r.PayloadHash = ""
		e.mustClaim(r)
		e.finish(fin(key, "A", idempotency.StateRetrying, t0.Add(time.Second)))
		if h := e.get(key).PayloadHash; h != "" {
			t.Fatalf("record hash %q after a claim without one", h)
		}
		r = req(key, "B", t0.Add(2*time.Second))
		r.PayloadHash = hash2
		rec := e.mustClaim(r)
		if rec.PayloadHash != hash2 || rec.Runs != 2 {
			t.Errorf("claim over a record without hash: hash %q runs %d, want %q 2", rec.PayloadHash, rec.Runs, hash2)
		}
	})
	t.Run("EmptyRequestHashRefusedByHashedRecord", func(t *testing.T) {
		e := &env{t: t, s: e.s, opts: e.opts, fresh: e.fresh, nonce: e.nonce, ctx: e.ctx}
		key := e.key()
		e.mustClaim(req(key, "A", t0))
		e.finish(fin(key, "A", idempotency.StateRetrying, t0.Add(time.Second)))
		r := req(key, "B", t0.Add(2*time.Second))
		r.PayloadHash = ""
		if res := e.claim(r); res.Claimed || res.Record.PayloadHash != hash1 {
			t.Errorf("claim without hash over a hashed record: Claimed %v hash %q, want refused by %q", res.Claimed, res.Record.PayloadHash, hash1)
		}
	})
}

func runsGrow(t *testing.T, e *env) {
	key := e.key()
	for i := 1; i <= 4; i++ {
		now := at(time.Duration(i) * time.Minute)
		token := "T" + strconv.Itoa(i)
		rec := e.mustClaim(req(key, token, now))
		if rec.Runs != i || !rec.FirstAttemptAt.Equal(at(time.Minute)) || !rec.LastAttemptAt.Equal(now) {
			t.Fatalf("claim %d: runs %d first %v last %v", i, rec.Runs, rec.FirstAttemptAt, rec.LastAttemptAt)
		}
		if i > 1 && rec.LastError != "failure "+strconv.Itoa(i-1) {
			t.Errorf("claim %d: LastError %q, want the previous failure's", i, rec.LastError)
		}
		f := fin(key, token, idempotency.StateRetrying, now.Add(time.Second))
		f.Error = "failure " + strconv.Itoa(i)
		e.finish(f)
	}
	if rec := e.get(key); rec.Runs != 4 || rec.State != idempotency.StateRetrying || rec.LastError != "failure 4" {
		t.Errorf("after 4 failures: %+v", rec)
	}
}

// attemptsBefore: a claim counts the envelope's attempts_before as runs already spent, so Runs
// becomes max(Runs, AttemptsBefore) + 1, whatever the record (none, expired, a producer's with 0
// runs, one with fewer or more runs).
func attemptsBefore(t *testing.T, e *env) {
	t0 := at(0)
	// failed leaves a retrying record with runs runs.
	failed := func(runs int) func(e *env, key string) {
		return func(e *env, key string) {
			for i := range runs {
				now := t0.Add(time.Duration(i) * time.Second)
				e.mustClaim(req(key, "F"+strconv.Itoa(i), now))
				e.finish(fin(key, "F"+strconv.Itoa(i), idempotency.StateRetrying, now.Add(time.Millisecond)))
			}
		}
	}
	tests := []struct {
		name     string
		setup    func(e *env, key string)
		before   int
		wantRuns int
	}{
		{"no-record", func(*env, string) {}, 3, 4},
		{"no-record/zero", func(*env, string) {}, 0, 1},
		{"expired", func(e *env, key string) {
			r := req(key, "F", t0)
			r.ExpiresAt = t0.Add(5 * time.Second)
			e.mustClaim(r)
		}, 2, 3},
		{"queued", func(e *env, key string) {
			e.seed(idempotency.Record{Kind: kind, Key: key, JobID: "job-producer", State: idempotency.StateQueued,
				PayloadHash: hash1, UpdatedAt: t0, ExpiresAt: t0.Add(24 * time.Hour)})
		}, 2, 3},
		{"fewer-runs", failed(1), 3, 4},
		{"as-many-runs", failed(2), 2, 3},
		{"more-runs", failed(3), 1, 4},
		{"runs/zero", failed(2), 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := &env{t: t, s: e.s, opts: e.opts, fresh: e.fresh, nonce: e.nonce, ctx: e.ctx}
			key := e.key()
			tt.setup(e, key)
			r := req(key, "B", t0.Add(time.Minute))
			r.AttemptsBefore = tt.before
			rec := e.mustClaim(r)
			if rec.Runs != tt.wantRuns || rec.State != idempotency.StateRunning || rec.Token != "B" {
				t.Errorf("claim with AttemptsBefore %d: runs %d state %s token %q, want runs %d running B",
					tt.before, rec.Runs, rec.State, rec.Token, tt.wantRuns)
			}
			if got := e.get(key); got.Runs != tt.wantRuns {
				t.Errorf("Get after the claim: runs %d, want %d", got.Runs, tt.wantRuns)
			}
			// The next claim without attempts_before goes on from there.
			e.finish(fin(key, "B", idempotency.StateRetrying, t0.Add(2*time.Minute)))
			if rec := e.mustClaim(req(key, "C", t0.Add(3*time.Minute))); rec.Runs != tt.wantRuns+1 {
				t.Errorf("next claim: runs %d, want %d", rec.Runs, tt.wantRuns+1)
			}
		})
	}
}

// notRun: a Finish with NotRun (the worker refused the claimed attempt as beyond MaxAttempts)
// records the job dead with the runs it had before the claim, max(runs, AttemptsBefore), in the
// same write; a Finish without it keeps the claim's run.
func notRun(t *testing.T, e *env) {
	t0 := at(0)
	tests := []struct {
		name     string
		failures int // retrying runs before the claim
		before   int
		notRun   bool
		wantRuns int
	}{
		{"no-record/attempts-before", 0, 3, true, 3},
		{"runs-recorded", 3, 0, true, 3},
		{"runs-and-attempts-before", 2, 3, true, 3},
		{"ran", 0, 3, false, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := &env{t: t, s: e.s, opts: e.opts, nonce: e.nonce, ctx: e.ctx}
			key := e.key()
			for i := range tt.failures {
				now := t0.Add(time.Duration(i) * time.Second)
				e.mustClaim(req(key, "F"+strconv.Itoa(i), now))
				e.finish(fin(key, "F"+strconv.Itoa(i), idempotency.StateRetrying, now.Add(time.Millisecond)))
			}
			r := req(key, "X", t0.Add(time.Minute))
			r.AttemptsBefore = tt.before
			if rec := e.mustClaim(r); rec.Runs != max(tt.failures, tt.before)+1 {
				t.Fatalf("claim: runs %d, want %d", rec.Runs, max(tt.failures, tt.before)+1)
			}
			f := fin(key, "X", idempotency.StateDead, t0.Add(2*time.Minute))
			f.Reason, f.Error, f.NotRun = "exhausted", "attempt 4 is beyond max attempts 3", tt.notRun
			e.finish(f)
			rec := e.get(key)
			if rec.Runs != tt.wantRuns || rec.State != idempotency.StateDead || rec.Reason != "exhausted" || rec.Token != "" {
				t.Errorf("after the finish (NotRun %v): runs %d state %s reason %q token %q, want runs %d dead exhausted",
					tt.notRun, rec.Runs, rec.State, rec.Reason, rec.Token, tt.wantRuns)
			}
		})
	}
}

// markDead: MarkDead makes a live record of the same job (job id, or payload hash) that waits for
// a run dead, and leaves every other record alone.
func markDead(t *testing.T, e *env) {
	t0 := at(0)
	seed := func(state idempotency.State) func(e *env, key string) {
		return func(e *env, key string) {
			e.seed(idempotency.Record{Kind: kind, Key: key, JobID: "job-P", State: state,
				PayloadHash: hash1, UpdatedAt: t0, ExpiresAt: t0.Add(24 * time.Hour)})
		}
	}
	finished := func(state idempotency.State) func(e *env, key string) {
		return func(e *env, key string) {
			e.mustClaim(req(key, "P", t0)) // job id "job-P", hash1
			f := fin(key, "P", state, t0.Add(time.Second))
			f.Error, f.Reason = "first failure", "first-reason"
			e.finish(f)
		}
	}
	running := func(leaseLeft time.Duration) func(e *env, key string) {
		return func(e *env, key string) {
			r := req(key, "P", t0)
			r.LeaseUntil = t0.Add(time.Minute + leaseLeft)
			e.mustClaim(r)
		}
	}
	expired := func(e *env, key string) {
		r := req(key, "P", t0)
		r.ExpiresAt = t0.Add(30 * time.Second)
		e.mustClaim(r)
		f := fin(key, "P", idempotency.StateRetrying, t0.Add(time.Second))
		f.ExpiresAt = t0.Add(30 * time.Second)
		e.finish(f)
	}
	tests := []struct {
		name       string
		setup      func(e *env, key string)
		jobID      string
		hash       string
		wantMarked bool
	}{
		{"queued/same-job", seed(idempotency.StateQueued), "job-P", hash2, true},
		{"scheduled/same-job", seed(idempotency.StateScheduled), "job-P", "", true},
		{"retrying/same-hash-other-job", finished(idempotency.StateRetrying), "job-Q", hash1, true},
		{"running/lease-ended", running(-time.Minute), "job-P", hash1, true},
		{"running/lease-live", running(time.Hour), "job-P", hash1, false},
		{"queued/other-job", seed(idempotency.StateQueued), "job-Q", hash2, false},
		{"succeeded", finished(idempotency.StateSucceeded), "job-P", hash1, false},
		{"cancelled", finished(idempotency.StateCancelled), "job-P", hash1, false},
		{"dead", finished(idempotency.StateDead), "job-P", hash1, false},
		{"expired", expired, "job-P", hash1, true},
		{"no-record", func(*env, string) {}, "job-P", hash1, true},
		{"no-record/hash-only", func(*env, string) {}, "", hash1, true},
	}
	now := t0.Add(time.Minute)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := &env{t: t, s: e.s, opts: e.opts, fresh: e.fresh, nonce: e.nonce, ctx: e.ctx}
			key := e.key()
			tt.setup(e, key)
			before, getErr := e.s.Get(e.ctx, kind, key)
			mark := idempotency.DeadMark{Kind: kind, Key: key, JobID: tt.jobID, PayloadHash: tt.hash, Reason: "unknown_kind",
				Error: "no worker for this kind", MessageID: "msg-dead", Now: now, ExpiresAt: now.Truncate(time.Second).Add(48 * time.Hour)}
			marked, err := e.s.MarkDead(e.ctx, mark)
			if err != nil || marked != tt.wantMarked {
				t.Fatalf("MarkDead = %v, %v; want %v", marked, err, tt.wantMarked)
			}
			after, err := e.s.Get(e.ctx, kind, key)
			if err != nil {
				t.Fatalf("Get after MarkDead: %v", err)
			}
			if !tt.wantMarked {
				checkRecord(t, "Get after a refused MarkDead (want unchanged)", after, before)
				return
			}
			want := before
			if errors.Is(getErr, idempotency.ErrNotFound) || before.Expired(now) {
				// No record (or only an expired one): a new one, dead, never run.
				want = idempotency.Record{Kind: kind, Key: key, JobID: tt.jobID, PayloadHash: tt.hash}
				before = want
			}
			want.State, want.Reason, want.LastError, want.DeadMessageID = idempotency.StateDead, mark.Reason, mark.Error, mark.MessageID
			want.Token, want.LeaseUntil, want.UpdatedAt, want.ExpiresAt = "", time.Time{}, now, mark.ExpiresAt
			checkRecord(t, "Get after MarkDead", after, want)
			// Like a dead record its run made: the dead-lettered message itself is refused, a
			// redriven copy claims it and its runs go on.
			again := req(key, "R1", now.Add(time.Second))
			again.MessageID, again.PayloadHash = "msg-dead", before.PayloadHash
			if res := e.claim(again); res.Claimed {
				t.Errorf("the dead-lettered message claimed the record MarkDead made dead")
			}
			redriven := req(key, "R2", now.Add(2*time.Second))
			redriven.MessageID, redriven.PayloadHash = "msg-redriven", before.PayloadHash
			if rec := e.mustClaim(redriven); rec.Runs != before.Runs+1 {
				t.Errorf("redriven claim: runs %d, want %d", rec.Runs, before.Runs+1)
			}
		})
	}
	t.Run("invalid", func(t *testing.T) {
		t.Parallel()
		e := &env{t: t, s: e.s, opts: e.opts, fresh: e.fresh, nonce: e.nonce, ctx: e.ctx}
		key := e.key()
		e.seed(idempotency.Record{Kind: kind, Key: key, JobID: "job-P", State: idempotency.StateQueued, UpdatedAt: t0})
		for name, mod := range map[string]func(*idempotency.DeadMark){
			"no-kind":        func(d *idempotency.DeadMark) { d.Kind = "" },
			"no-key":         func(d *idempotency.DeadMark) { d.Key = "" },
			"no-reason":      func(d *idempotency.DeadMark) { d.Reason = "" },
			"no-job-or-hash": func(d *idempotency.DeadMark) { d.JobID, d.PayloadHash = "", "" },
			"no-now":         func(d *idempotency.DeadMark) { d.Now = time.Time{} },
		} {
			d := idempotency.DeadMark{Kind: kind, Key: key, JobID: "job-P", Reason: "unknown_kind", Now: now}
			mod(&d)
			if marked, err := e.s.MarkDead(e.ctx, d); err == nil || marked {
				t.Errorf("MarkDead %s = %v, %v; want an error", name, marked, err)
			}
		}
		if rec := e.get(key); rec.State != idempotency.StateQueued {
			t.Errorf("invalid MarkDeads changed the record: %+v", rec)
		}
	})
}

func wrongToken(t *testing.T, e *env) {
	t0 := at(0)
	key := e.key()
	e.mustClaim(req(key, "A", t0))
	before := e.get(key)
	checks := []struct {
		name string
		err  error
	}{
		{"Finish/wrong-token", e.s.Finish(e.ctx, fin(key, "X", idempotency.StateSucceeded, t0.Add(time.Second)))},
		{"Renew/wrong-token", e.s.Renew(e.ctx, idempotency.Renewal{Kind: kind, Key: key, Token: "X", LeaseUntil: t0.Add(time.Hour)})},
		{"Finish/unknown-key", e.s.Finish(e.ctx, fin(e.key(), "A", idempotency.StateSucceeded, t0))},
		{"Renew/unknown-key", e.s.Renew(e.ctx, idempotency.Renewal{Kind: kind, Key: e.key(), Token: "A", LeaseUntil: t0.Add(time.Hour)})},
	}
	for _, c := range checks {
		if !errors.Is(c.err, idempotency.ErrLeaseLost) {
			t.Errorf("%s = %v, want ErrLeaseLost", c.name, c.err)
		}
	}
	checkRecord(t, "Get after wrong-token writes (want unchanged)", e.get(key), before)

	// A finished claim is no longer held, not even by its own token.
	e.finish(fin(key, "A", idempotency.StateRetrying, t0.Add(time.Second)))
	if err := e.s.Finish(e.ctx, fin(key, "A", idempotency.StateSucceeded, t0.Add(2*time.Second))); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Errorf("second Finish = %v, want ErrLeaseLost", err)
	}
	if err := e.s.Renew(e.ctx, idempotency.Renewal{Kind: kind, Key: key, Token: "A", LeaseUntil: t0.Add(time.Hour)}); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Errorf("Renew after Finish = %v, want ErrLeaseLost", err)
	}
	if rec := e.get(key); rec.State != idempotency.StateRetrying {
		t.Errorf("state %s after a refused second Finish, want retrying", rec.State)
	}
}

func leaseTakeover(t *testing.T, e *env) {
	t0 := at(0)
	key := e.key()
	e.mustClaim(req(key, "A", t0))
	rec := e.mustClaim(req(key, "B", t0.Add(lease)))
	if rec.Runs != 2 || rec.Token != "B" {
		t.Fatalf("takeover: runs %d token %q", rec.Runs, rec.Token)
	}
	if err := e.s.Renew(e.ctx, idempotency.Renewal{Kind: kind, Key: key, Token: "A", LeaseUntil: t0.Add(time.Hour)}); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Errorf("Renew by the old token = %v, want ErrLeaseLost", err)
	}
	if err := e.s.Finish(e.ctx, fin(key, "A", idempotency.StateSucceeded, t0.Add(lease+time.Second))); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Errorf("Finish by the old token = %v, want ErrLeaseLost", err)
	}
	if got := e.get(key); got.State != idempotency.StateRunning || got.Token != "B" {
		t.Errorf("after the old token's Finish: state %s token %q, want running B", got.State, got.Token)
	}
	e.finish(fin(key, "B", idempotency.StateSucceeded, t0.Add(lease+2*time.Second)))
	if got := e.get(key); got.State != idempotency.StateSucceeded || got.Runs != 2 {
		t.Errorf("after the new token's Finish: state %s runs %d", got.State, got.Runs)
	}
}

func renewExtends(t *testing.T, e *env) {
	t0 := at(0)
	key := e.key()
	e.mustClaim(req(key, "A", t0))
	newLease := t0.Add(5*time.Minute + 250*time.Millisecond)
	if err := e.s.Renew(e.ctx, idempotency.Renewal{Kind: kind, Key: key, Token: "A", LeaseUntil: newLease}); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if got := e.get(key); !got.LeaseUntil.Equal(newLease) || got.Token != "A" {
		t.Errorf("after Renew: lease %v token %q, want %v A", got.LeaseUntil, got.Token, newLease)
	}
	if res := e.claim(req(key, "B", t0.Add(2*time.Minute))); res.Claimed || !res.Record.LeaseUntil.Equal(newLease) {
		t.Errorf("claim within the renewed lease: Claimed %v lease %v", res.Claimed, res.Record.LeaseUntil)
	}
	if rec := e.mustClaim(req(key, "C", newLease)); rec.Runs != 2 {
		t.Errorf("claim at the renewed lease's end: runs %d, want 2", rec.Runs)
	}
}

func getRoundTrip(t *testing.T, e *env) {
	ms := time.Millisecond
	t1, t2, t3, t4 := at(1001*ms), at(2002*ms), at(3003*ms), at(4004*ms)
	e2, e4 := at(48*time.Hour), at(72*time.Hour)
	key := e.key()

	r1 := req(key, "A", t1)
	want := claimed(r1)
	checkRecord(t, "first claim", e.mustClaim(r1), want)
	checkRecord(t, "Get after the first claim", e.get(key), want)

	f := fin(key, "A", idempotency.StateRetrying, t2)
	f.Error, f.ExpiresAt = "boom: it failed", e2
	e.finish(f)
	want.State, want.Token, want.LeaseUntil = idempotency.StateRetrying, "", time.Time{}
	want.LastError, want.UpdatedAt, want.ExpiresAt = f.Error, t2, e2
	checkRecord(t, "Get after a failure", e.get(key), want)

	r3 := req(key, "B", t3)
	want.JobID, want.State, want.Runs, want.Token, want.LeaseUntil = r3.JobID, idempotency.StateRunning, 2, "B", r3.LeaseUntil
	want.LastAttemptAt, want.UpdatedAt, want.ExpiresAt = t3, t3, r3.ExpiresAt
	checkRecord(t, "second claim", e.mustClaim(r3), want)

	f = fin(key, "B", idempotency.StateSucceeded, t4)
	f.ExpiresAt = e4
	e.finish(f)
	want.State, want.Token, want.LeaseUntil, want.UpdatedAt, want.ExpiresAt = idempotency.StateSucceeded, "", time.Time{}, t4, e4
	checkRecord(t, "Get after success (the last error is kept)", e.get(key), want)

	for _, tt := range []struct {
		state          idempotency.State
		reason, errMsg string
	}{
		{idempotency.StateDead, "exhausted", "gave up"},
		{idempotency.StateCancelled, "cancelled", "stop"},
	} {
		key := e.key()
		r := req(key, "A", t1)
		e.mustClaim(r)
		f := fin(key, "A", tt.state, t2)
		f.Error, f.Reason, f.ExpiresAt = tt.errMsg, tt.reason, time.Time{}
		e.finish(f)
		want := claimed(r)
		want.State, want.Token, want.LeaseUntil, want.UpdatedAt = tt.state, "", time.Time{}, t2
		want.LastError, want.Reason, want.ExpiresAt = tt.errMsg, tt.reason, time.Time{}
		checkRecord(t, "Get after Finish "+string(tt.state)+" without expiry", e.get(key), want)
	}
}

func errorTruncated(t *testing.T, e *env) {
	const max = idempotency.MaxErrorBytes
	tests := []struct {
		name  string
		msg   string
		valid bool // msg is valid UTF-8: the stored text is its longest prefix that fits
	}{
		{"short", "short error", true},
		{"exactly-max", strings.Repeat("a", max), true},
		{"ascii-over", strings.Repeat("a", max+100), true},
		{"2-byte-runes-cut-mid-rune", "x" + strings.Repeat("é", max), true},
		{"3-byte-runes", strings.Repeat("€", max), true},
		{"4-byte-runes", "ab" + strings.Repeat("😀", max), true},
		{"invalid-utf8", "bad \xff\xfe bytes", false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := &env{t: t, s: e.s, opts: e.opts, fresh: e.fresh, nonce: e.nonce, ctx: e.ctx}
			key := e.key()
			now := at(time.Duration(i) * time.Second)
			e.mustClaim(req(key, "A", now))
			f := fin(key, "A", idempotency.StateRetrying, now.Add(time.Second))
			f.Error = tt.msg
			e.finish(f)
			got := e.get(key).LastError
			if len(got) > max || !utf8.ValidString(got) {
				t.Fatalf("stored %d bytes (valid UTF-8: %v), want at most %d of valid UTF-8", len(got), utf8.ValidString(got), max)
			}
			if !tt.valid {
				if got == "" {
					t.Error("invalid UTF-8 error text was dropped entirely")
				}
				return
			}
			want := tt.msg
			if len(want) > max {
				want = want[:max]
				for !utf8.ValidString(want) {
					want = want[:len(want)-1]
				}
			}
			if got != want {
				t.Errorf("stored %d bytes, want the %d-byte prefix", len(got), len(want))
			}
			// The claim's record carries the error too.
			if rec := e.mustClaim(req(key, "B", now.Add(2*time.Second))); rec.LastError != want {
				t.Errorf("claim result's LastError differs from the stored one (%d bytes)", len(rec.LastError))
			}
		})
	}
}

func concurrentClaims(t *testing.T, e *env) {
	const goroutines = 16
	t0 := at(0)
	exp := t0.Add(10 * time.Second)
	tests := []struct {
		name  string
		setup func(e *env, key string)
		now   time.Time
		runs  int
	}{
		{"no-record", func(*env, string) {}, t0, 1},
		{"retrying", func(e *env, key string) {
			e.mustClaim(req(key, "S", t0))
			e.finish(fin(key, "S", idempotency.StateRetrying, t0))
		}, t0.Add(time.Second), 2},
		{"lease-ended", func(e *env, key string) { e.mustClaim(req(key, "S", t0)) }, t0.Add(lease), 2},
		{"expired", func(e *env, key string) {
			e.mustClaim(req(key, "S", t0))
			f := fin(key, "S", idempotency.StateSucceeded, t0)
			f.ExpiresAt = exp
			e.finish(f)
		}, exp, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := &env{t: t, s: e.s, opts: e.opts, fresh: e.fresh, nonce: e.nonce, ctx: e.ctx}
			key := e.key()
			tt.setup(e, key)
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				winners []string
				losers  []idempotency.Record
				errs    []error
			)
			for i := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					token := "G" + strconv.Itoa(i)
					r := req(key, token, tt.now)
					r.Fresh = e.fresh
					res, err := e.s.Claim(e.ctx, r)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err != nil:
						errs = append(errs, err)
					case res.Claimed:
						winners = append(winners, token)
					default:
						losers = append(losers, res.Record)
					}
				}()
			}
			wg.Wait()
			if len(errs) > 0 {
				t.Fatalf("%d claims failed: %v", len(errs), errors.Join(errs...))
			}
			if len(winners) != 1 {
				t.Fatalf("%d of %d concurrent claims won (%v), want exactly 1", len(winners), goroutines, winners)
			}
			for _, l := range losers {
				if l.State != idempotency.StateRunning || l.Token != winners[0] {
					t.Errorf("a loser was refused by state %s token %q, want running %s", l.State, l.Token, winners[0])
				}
			}
			if rec := e.get(key); rec.Token != winners[0] || rec.Runs != tt.runs {
				t.Errorf("Get: token %q runs %d, want %s %d", rec.Token, rec.Runs, winners[0], tt.runs)
			}
		})
	}
}

func getUnknown(t *testing.T, e *env) {
	if _, err := e.s.Get(e.ctx, kind, e.key()); !errors.Is(err, idempotency.ErrNotFound) {
		t.Errorf("Get of an unknown key = %v, want ErrNotFound", err)
	}
}

func keysScopedByKind(t *testing.T, e *env) {
	key := e.key()
	a := req(key, "A", at(0))
	b := req(key, "B", at(0))
	b.Kind = kind + ".other"
	e.mustClaim(a)
	e.mustClaim(b)
	if rec, err := e.s.Get(e.ctx, b.Kind, key); err != nil || rec.Token != "B" || rec.Kind != b.Kind {
		t.Errorf("Get(other kind) = %+v, %v", rec, err)
	}
	if rec := e.get(key); rec.Token != "A" {
		t.Errorf("Get(kind) token %q, want A", rec.Token)
	}
}

func longKey(t *testing.T, e *env) {
	key := e.key() + "/" + strings.Repeat("k", 3000) // longer than DynamoDB's 2,048-byte partition key
	other := key[:len(key)-1] + "j"                  // same long prefix
	r := req(key, "A", at(0))
	checkRecord(t, "claim of a long key", e.mustClaim(r), claimed(r))
	e.finish(fin(key, "A", idempotency.StateSucceeded, at(time.Second)))
	if rec := e.get(key); rec.Key != key || rec.State != idempotency.StateSucceeded {
		t.Errorf("Get of a long key: key of %d bytes, state %s", len(rec.Key), rec.State)
	}
	if _, err := e.s.Get(e.ctx, kind, other); !errors.Is(err, idempotency.ErrNotFound) {
		t.Errorf("Get of another long key with the same prefix = %v, want ErrNotFound", err)
	}
	e.mustClaim(req(other, "B", at(0)))
}

func invalidRequests(t *testing.T, e *env) {
	t0 := at(0)
	key := e.key()
	for _, tt := range []struct {
		name string
		mod  func(*idempotency.ClaimRequest)
	}{
		{"no-kind", func(r *idempotency.ClaimRequest) { r.Kind = "" }},
		{"no-key", func(r *idempotency.ClaimRequest) { r.Key = "" }},
		{"no-token", func(r *idempotency.ClaimRequest) { r.Token = "" }},
		{"negative-attempts-before", func(r *idempotency.ClaimRequest) { r.AttemptsBefore = -1 }},
	} {
		r := req(key, "A", t0)
		tt.mod(&r)
		if res, err := e.s.Claim(e.ctx, r); err == nil || res.Claimed {
			t.Errorf("Claim %s = %+v, %v; want an error", tt.name, res, err)
		}
	}
	if _, err := e.s.Get(e.ctx, kind, key); !errors.Is(err, idempotency.ErrNotFound) {
		t.Errorf("an invalid claim left a record (Get: %v)", err)
	}
	e.mustClaim(req(key, "A", t0))
	before := e.get(key)
	for _, state := range []idempotency.State{idempotency.StateRunning, idempotency.StateQueued, ""} {
		err := e.s.Finish(e.ctx, fin(key, "A", state, t0.Add(time.Second)))
		if err == nil || errors.Is(err, idempotency.ErrLeaseLost) {
			t.Errorf("Finish to state %q = %v, want an invalid-request error", state, err)
		}
	}
	checkRecord(t, "Get after invalid Finishes (want unchanged)", e.get(key), before)
}

// deadRefusesItsOwnMessage: a record made dead by message m refuses a claim from m (m came back
// because its DLQ send failed: the job must not run again), and accepts one from another message
// (a redriven copy), whose run count continues.
func deadRefusesItsOwnMessage(t *testing.T, e *env) {
	key := e.key()
	r := req(key, "t1", at(0))
	r.MessageID = "msg-1"
	e.mustClaim(r)
	e.finish(idempotency.Finish{Kind: kind, Key: key, Token: "t1", State: idempotency.StateDead, Reason: "cancelled",
		Error: "no", MessageID: "msg-1", Now: at(time.Second), ExpiresAt: at(24 * time.Hour)})
	if got := e.get(key); got.DeadMessageID != "msg-1" || got.State != idempotency.StateDead {
		t.Fatalf("dead record = %+v, want DeadMessageID msg-1", got)
	}
	again := req(key, "t2", at(time.Minute))
	again.MessageID = "msg-1"
	if res := e.claim(again); res.Claimed || res.Record.State != idempotency.StateDead || res.Record.Reason != "cancelled" {
		t.Fatalf("claim by the dead-lettered message = %+v, want refused with the dead record", res)
	}
	redriven := req(key, "t3", at(2*time.Minute))
	redriven.MessageID = "msg-2"
	rec := e.mustClaim(redriven)
	if rec.Runs != 2 {
		t.Errorf("runs after the redriven claim = %d, want 2", rec.Runs)
	}
}

// touchUnderClaim checks Touch: it renews the lease and records progress under the claim's token
// alone, returns the record after the write, leaves the state and UpdatedAt alone, and the
// progress goes with the run (Finish may flush the last one; the next claim removes it).
func touchUnderClaim(t *testing.T, e *env) {
	t0 := at(0)
	key := e.key()
	r := req(key, "A", t0)
	want := e.mustClaim(r)

	newLease := t0.Add(3*time.Minute + 7*time.Millisecond)
	got, err := e.s.Touch(e.ctx, idempotency.Touch{Kind: kind, Key: key, JobID: r.JobID, Token: "A", LeaseUntil: newLease})
	if err != nil {
		t.Fatalf("Touch (lease): %v", err)
	}
	want.LeaseUntil = newLease
	checkRecord(t, "Touch (lease) returns the record after the write", got, want)
	checkRecord(t, "Get after Touch (lease)", e.get(key), want)

	t1 := t0.Add(1500 * time.Millisecond)
	got, err = e.s.Touch(e.ctx, idempotency.Touch{Kind: kind, Key: key, JobID: r.JobID, Token: "A", Now: t1,
		Progress: &idempotency.Progress{Fraction: 0.123456, Message: "page 4 of 10"}})
	if err != nil {
		t.Fatalf("Touch (progress): %v", err)
	}
	want.Progress = idempotency.Progress{Fraction: 0.1235, Message: "page 4 of 10", At: t1}
	checkRecord(t, "Touch (progress): fraction at 4 decimals, At = Now, lease and UpdatedAt unchanged", got, want)

	// Both at once; a message cut on a rune boundary, invalid UTF-8 replaced; an empty message
	// replaces the last one.
	long := strings.Repeat("é", idempotency.MaxProgressMessageBytes) // 2 bytes each
	t2, lease2 := t0.Add(2*time.Second), t0.Add(4*time.Minute)
	got, err = e.s.Touch(e.ctx, idempotency.Touch{Kind: kind, Key: key, JobID: r.JobID, Token: "A", LeaseUntil: lease2,
		Progress: &idempotency.Progress{Fraction: 1, Message: "\xff" + long, At: t2}})
	if err != nil {
		t.Fatalf("Touch (lease and progress): %v", err)
	}
	if m := got.Progress.Message; len(m) > idempotency.MaxProgressMessageBytes || !utf8.ValidString(m) || !strings.HasPrefix(m, "\uFFFDé") {
		t.Errorf("progress message kept as %d bytes %q…, want valid UTF-8 of at most %d starting with U+FFFD", len(m), m[:min(len(m), 8)], idempotency.MaxProgressMessageBytes)
	}
	if got.Progress.Fraction != 1 || !got.Progress.At.Equal(t2) || !got.LeaseUntil.Equal(lease2) {
		t.Errorf("after Touch (lease and progress): fraction %v at %v lease %v", got.Progress.Fraction, got.Progress.At, got.LeaseUntil)
	}
	got, err = e.s.Touch(e.ctx, idempotency.Touch{Kind: kind, Key: key, JobID: r.JobID, Token: "A", Now: t2,
		Progress: &idempotency.Progress{Fraction: 0.5}})
	if err != nil || got.Progress.Message != "" || got.Progress.Fraction != 0.5 {
		t.Errorf("Touch with an empty message: %v, progress %+v, want 0.5 with no message", err, got.Progress)
	}

	// Refused: another token, a finished claim, a key without a record.
	before := e.get(key)
	for name, tch := range map[string]idempotency.Touch{
		"wrong-token": {Kind: kind, Key: key, JobID: r.JobID, Token: "X", LeaseUntil: t0.Add(time.Hour)},
		"unknown-key": {Kind: kind, Key: e.key(), Token: "A", LeaseUntil: t0.Add(time.Hour)},
	} {
		if _, err := e.s.Touch(e.ctx, tch); !errors.Is(err, idempotency.ErrLeaseLost) {
			t.Errorf("Touch %s = %v, want ErrLeaseLost", name, err)
		}
	}
	checkRecord(t, "Get after refused touches (want unchanged)", e.get(key), before)

	// Invalid touches are errors, not lost leases, and write nothing.
	for name, tch := range map[string]idempotency.Touch{
		"nothing":  {Kind: kind, Key: key, JobID: r.JobID, Token: "A", Now: t2},
		"no-token": {Kind: kind, Key: key, JobID: r.JobID, LeaseUntil: t0.Add(time.Hour)},
		"above-1":  {Kind: kind, Key: key, JobID: r.JobID, Token: "A", Now: t2, Progress: &idempotency.Progress{Fraction: 1.01}},
		"negative": {Kind: kind, Key: key, JobID: r.JobID, Token: "A", Now: t2, Progress: &idempotency.Progress{Fraction: -0.1}},
		"no-time":  {Kind: kind, Key: key, JobID: r.JobID, Token: "A", Progress: &idempotency.Progress{Fraction: 0.1}},
	} {
		if _, err := e.s.Touch(e.ctx, tch); err == nil || errors.Is(err, idempotency.ErrLeaseLost) {
			t.Errorf("Touch %s = %v, want an invalid-request error", name, err)
		}
	}
	checkRecord(t, "Get after invalid touches (want unchanged)", e.get(key), before)

	// Finish flushes the last progress in its own write; the next claim starts without it.
	f := fin(key, "A", idempotency.StateRetrying, t0.Add(3*time.Second))
	f.JobID, f.Error = r.JobID, "boom"
	f.Progress = &idempotency.Progress{Fraction: 0.75, Message: "almost"}
	e.finish(f)
	if got := e.get(key); got.Progress.Fraction != 0.75 || got.Progress.Message != "almost" || !got.Progress.At.Equal(f.Now) {
		t.Errorf("after Finish with progress: %+v, want 0.75 almost at %v", got.Progress, f.Now)
	}
	if _, err := e.s.Touch(e.ctx, idempotency.Touch{Kind: kind, Key: key, JobID: r.JobID, Token: "A", LeaseUntil: t0.Add(time.Hour)}); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Errorf("Touch after Finish = %v, want ErrLeaseLost", err)
	}
	rec := e.mustClaim(req(key, "B", t0.Add(4*time.Second)))
	if !rec.Progress.IsZero() {
		t.Errorf("a new claim kept the last run's progress %+v", rec.Progress)
	}
	if got := e.get(key); !got.Progress.IsZero() {
		t.Errorf("Get after a new claim: progress %+v, want none", got.Progress)
	}
}

// touchReturnsCancelRequest checks that the record Touch returns carries a cancellation request
// written on the running record (by pkg/status, seeded here), and that Touch keeps it.
func touchReturnsCancelRequest(t *testing.T, e *env) {
	t0 := at(0)
	key := e.key()
	rec := claimed(req(key, "A", t0))
	rec.CancelRequestedAt, rec.CancelReason = t0.Add(2*time.Second), "stop: <b>\u202e"
	e.seed(rec)
	got, err := e.s.Touch(e.ctx, idempotency.Touch{Kind: kind, Key: key, JobID: rec.JobID, Token: "A", LeaseUntil: t0.Add(2 * time.Minute)})
	if err != nil {
		t.Fatalf("Touch: %v", err)
	}
	if !got.CancelRequestedAt.Equal(rec.CancelRequestedAt) || got.CancelReason != rec.CancelReason {
		t.Errorf("Touch returned cancel request %v %q, want %v %q", got.CancelRequestedAt, got.CancelReason, rec.CancelRequestedAt, rec.CancelReason)
	}
	if g := e.get(key); !g.CancelRequestedAt.Equal(rec.CancelRequestedAt) {
		t.Errorf("Get after Touch: cancel request %v, want %v kept", g.CancelRequestedAt, rec.CancelRequestedAt)
	}
}

// cancelRequestWhileRunning checks what a cancellation request on a running record (written by
// pkg/status, seeded here) does to the claim's holder and to other claims: the holder keeps its
// claim (Touch, Finish); a failure is recorded as cancelled (ErrRecordedCancelled), other
// outcomes as they are; no other claim takes the job over, not even after its lease ended; a
// claim over the finished record removes the request.
func cancelRequestWhileRunning(t *testing.T, e *env) {
	t0 := at(0)
	requested := func(key string) idempotency.Record {
		rec := claimed(req(key, "A", t0))
		rec.CancelRequestedAt, rec.CancelReason = t0.Add(time.Second), "operator"
		e.seed(rec)
		return rec
	}

	t.Run("FailureBecomesCancelled", func(t *testing.T) {
		key := e.key()
		want := requested(key)
		if res := e.claim(req(key, "B", t0.Add(2*time.Second))); res.Claimed {
			t.Fatal("a claim within the lease took a running job over")
		}
		f := fin(key, "A", idempotency.StateRetrying, t0.Add(3*time.Second))
		f.JobID, f.Error = want.JobID, "context canceled"
		if err := e.s.Finish(e.ctx, f); !errors.Is(err, idempotency.ErrRecordedCancelled) {
			t.Fatalf("Finish(retrying) of a record with a cancel request = %v, want ErrRecordedCancelled", err)
		}
		want.State, want.Reason, want.LastError = idempotency.StateCancelled, "cancelled", f.Error
		want.Token, want.LeaseUntil, want.UpdatedAt, want.ExpiresAt = "", time.Time{}, f.Now, f.ExpiresAt
		checkRecord(t, "Get after the failure of a job asked to cancel", e.get(key), want)
		if res := e.claim(req(key, "C", t0.Add(time.Hour))); res.Claimed {
			t.Errorf("a cancelled job was claimed again")
		}
	})

	t.Run("OtherOutcomesStand", func(t *testing.T) {
		for _, st := range []idempotency.State{idempotency.StateSucceeded, idempotency.StateDead, idempotency.StateCancelled} {
			key := e.key()
			want := requested(key)
			f := fin(key, "A", st, t0.Add(3*time.Second))
			f.JobID = want.JobID
			if st != idempotency.StateSucceeded {
				f.Reason, f.Error = "cancelled", "stopped"
			}
			if err := e.s.Finish(e.ctx, f); err != nil {
				t.Fatalf("Finish(%s) = %v", st, err)
			}
			if got := e.get(key); got.State != st || !got.CancelRequestedAt.Equal(want.CancelRequestedAt) {
				t.Errorf("after Finish(%s): state %s, cancel request %v; want %s with the request kept", st, got.State, got.CancelRequestedAt, st)
			}
		}
	})

	t.Run("NoTakeoverAfterTheLease", func(t *testing.T) {
		key := e.key()
		want := requested(key)
		res := e.claim(req(key, "B", want.LeaseUntil.Add(time.Second)))
		if res.Claimed {
			t.Fatal("a running job asked to cancel was taken over after its lease ended")
		}
		if res.Record.Token != "A" || res.Record.CancelRequestedAt.IsZero() {
			t.Errorf("refusal returned token %q, cancel request %v; want the holder's record with the request", res.Record.Token, res.Record.CancelRequestedAt)
		}
		// Whoever records it (the middleware, on the holder's behalf) finishes the old claim.
		f := fin(key, "A", idempotency.StateCancelled, want.LeaseUntil.Add(2*time.Second))
		f.JobID, f.Reason = want.JobID, "cancelled"
		e.finish(f)
		if got := e.get(key); got.State != idempotency.StateCancelled {
			t.Errorf("state %s, want cancelled", got.State)
		}
	})

	t.Run("ClaimRemovesTheRequest", func(t *testing.T) {
		key := e.key()
		want := requested(key)
		f := fin(key, "A", idempotency.StateDead, t0.Add(3*time.Second))
		f.JobID, f.Reason = want.JobID, "exhausted"
		e.finish(f)
		rec := e.mustClaim(req(key, "B", t0.Add(4*time.Second))) // a redriven dead job
		if !rec.CancelRequestedAt.IsZero() || rec.CancelReason != "" {
			t.Errorf("a new claim kept the last run's cancel request (%v %q)", rec.CancelRequestedAt, rec.CancelReason)
		}
		if got := e.get(key); !got.CancelRequestedAt.IsZero() {
			t.Errorf("Get after a new claim: cancel request %v", got.CancelRequestedAt)
		}
	})
}
