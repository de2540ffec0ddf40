package status

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// TestWorksWithTheStore runs the idempotency DynamoDB store and this package on one table: the
// store claims what this package records, this package lists what the store writes, and a
// cancellation survives the cancelled run's completion.
func TestWorksWithTheStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tbl, client, name := emulatorTable(t)
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: client, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	now := testNow.Add(-time.Minute)
	claim := func(key, job, hash, token string) idempotency.ClaimResult {
		t.Helper()
		res, err := store.Claim(ctx, idempotency.ClaimRequest{
			Kind: "email.send", Key: key, JobID: job, PayloadHash: hash, Token: token,
			Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(14 * 24 * time.Hour),
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	finish := func(key, token string, state idempotency.State, msg string) error {
		return store.Finish(ctx, idempotency.Finish{
			Kind: "email.send", Key: key, Token: token, State: state, Error: msg,
			Now: now.Add(time.Second), ExpiresAt: now.Add(14 * 24 * time.Hour),
		})
	}
	list := func(state idempotency.State) []string {
		return walk(t, tbl, ListQuery{State: state, Kind: "email.send", Limit: 10})
	}

	// queued → claimed → retrying: listed as retrying, with the store's fields.
	if err := tbl.RecordQueued(ctx, QueuedJob{Kind: "email.send", Key: "q", JobID: "job-q", PayloadHash: "h", At: now.Add(-time.Second), ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if res := claim("q", "job-q", "h", "tq"); !res.Claimed || res.Record.Runs != 1 {
		t.Fatalf("claim of a queued record: %+v", res)
	}
	if err := finish("q", "tq", idempotency.StateRetrying, "smtp timeout"); err != nil {
		t.Fatal(err)
	}
	p, err := tbl.List(ctx, ListQuery{State: idempotency.StateRetrying})
	if err != nil || len(p.Jobs) != 1 || p.Jobs[0].LastError != "smtp timeout" || p.Jobs[0].Runs != 1 {
		t.Fatalf("retrying listing: %+v, %v", p.Jobs, err)
	}
	if j, err := tbl.GetByID(ctx, "job-q"); err != nil || j.Key != "q" {
		t.Fatalf("GetByID: %+v, %v", j, err)
	}

	// scheduled → claimed: leaves the scheduled listing.
	if err := tbl.RecordScheduled(ctx, ScheduledJob{Kind: "email.send", Key: "s", JobID: "job-s", At: now.Add(-time.Second), RunAt: now}); err != nil {
		t.Fatal(err)
	}
	if got := list(idempotency.StateScheduled); !slices.Equal(got, []string{"email.send#s"}) {
		t.Fatalf("scheduled listing %v", got)
	}
	if res := claim("s", "job-s", "", "ts"); !res.Claimed {
		t.Fatalf("claim of a scheduled record: %+v", res)
	}
	if got := list(idempotency.StateScheduled); len(got) != 0 {
		t.Fatalf("scheduled listing after the claim: %v", got)
	}

	// running → cancelled: the run's completion is refused, later deliveries do not run.
	if res := claim("r", "job-r", "", "tr"); !res.Claimed {
		t.Fatalf("claim: %+v", res)
	}
	if err := tbl.Cancel(ctx, "email.send", "r", now.Add(500*time.Millisecond), "operator"); err != nil {
		t.Fatal(err)
	}
	if err := finish("r", "tr", idempotency.StateRetrying, "failed"); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("finish after cancel: %v, want ErrLeaseLost", err)
	}
	if res := claim("r", "job-r", "", "tr2"); res.Claimed || res.Record.State != idempotency.StateCancelled {
		t.Fatalf("claim after cancel: %+v", res)
	}
	if got := list(idempotency.StateCancelled); !slices.Equal(got, []string{"email.send#r"}) {
		t.Fatalf("cancelled listing %v", got)
	}

	// succeeded: RecordQueued leaves it, Cancel refuses.
	if res := claim("ok", "job-ok", "", "tok"); !res.Claimed {
		t.Fatal("claim")
	}
	if err := finish("ok", "tok", idempotency.StateSucceeded, ""); err != nil {
		t.Fatal(err)
	}
	if err := tbl.RecordQueued(ctx, QueuedJob{Kind: "email.send", Key: "ok", JobID: "job-ok"}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Cancel(ctx, "email.send", "ok", time.Time{}, ""); !errors.Is(err, ErrSucceeded) {
		t.Fatalf("cancel of a succeeded job: %v", err)
	}
	if j, err := tbl.Get(ctx, "email.send", "ok"); err != nil || j.State != idempotency.StateSucceeded {
		t.Fatalf("Get: %+v, %v", j, err)
	}
}
