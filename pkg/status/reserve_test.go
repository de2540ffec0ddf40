package status

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// TestReserveQueued runs the reservation a producer makes before it sends, against the embedded
// emulator: the first reservation of a key writes a queued record; the next ones find it, with
// its job id and payload hash; an expired record counts as absent; a worker's claim takes the
// reserved record over (same hash) or refuses the job (another hash).
func TestReserveQueued(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tbl, client, name := emulatorTable(t)
	hash, err := jobs.PayloadHash("email.send", []byte(`{"to":"ada@example.com"}`))
	if err != nil {
		t.Fatal(err)
	}

	first, created, err := tbl.ReserveQueued(ctx, QueuedJob{Kind: "email.send", Key: "welcome-ada", JobID: "job-1", PayloadHash: hash})
	if err != nil || !created {
		t.Fatalf("first reservation: created %v, %v", created, err)
	}
	if first.State != idempotency.StateQueued || first.JobID != "job-1" || first.PayloadHash != hash || first.Runs != 0 {
		t.Fatalf("first reservation returned %+v", first.Record)
	}
	if want := testNow.Add(15 * 24 * time.Hour); !first.ExpiresAt.Equal(want) {
		t.Errorf("expires at %v, want At + CancelTTL = %v", first.ExpiresAt, want)
	}
	got, err := tbl.Get(ctx, "email.send", "welcome-ada")
	if err != nil || got.JobID != "job-1" || got.State != idempotency.StateQueued || got.PayloadHash != hash {
		t.Fatalf("record read back: %+v, %v", got.Record, err)
	}

	// The same key again, with any payload: not written, the first record returned unchanged.
	for _, h := range []string{hash, "another-hash"} {
		again, created, err := tbl.ReserveQueued(ctx, QueuedJob{Kind: "email.send", Key: "welcome-ada", JobID: "job-2", PayloadHash: h})
		if err != nil || created {
			t.Fatalf("second reservation (hash %s): created %v, %v", h, created, err)
		}
		if again.JobID != "job-1" || again.PayloadHash != hash || again.State != idempotency.StateQueued {
			t.Fatalf("second reservation returned %+v, want the first record", again.Record)
		}
	}
	// The key is scoped by kind: another kind's key of the same name is another job.
	if _, created, err := tbl.ReserveQueued(ctx, QueuedJob{Kind: "report.build", Key: "welcome-ada", JobID: "job-3"}); err != nil || !created {
		t.Fatalf("other kind, same key: created %v, %v", created, err)
	}

	// The worker claims the reserved record: same hash, so it runs it (runs 1, job id kept).
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: client, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	claim := idempotency.ClaimRequest{Kind: "email.send", Key: "welcome-ada", JobID: "job-1", PayloadHash: hash, Token: "tok-1",
		Now: testNow, LeaseUntil: testNow.Add(time.Minute), ExpiresAt: testNow.Add(time.Hour)}
	cr, err := store.Claim(ctx, claim)
	if err != nil || !cr.Claimed || cr.Record.Runs != 1 {
		t.Fatalf("worker claim of the reserved record: %+v, %v", cr, err)
	}
	// Now running: a reservation still finds it (state running), and Release leaves it alone.
	again, created, err := tbl.ReserveQueued(ctx, QueuedJob{Kind: "email.send", Key: "welcome-ada", JobID: "job-4", PayloadHash: hash})
	if err != nil || created || again.State != idempotency.StateRunning || again.JobID != "job-1" {
		t.Fatalf("reservation of a running job: %+v created %v, %v", again.Record, created, err)
	}
	if err := tbl.ReleaseQueued(ctx, "email.send", "welcome-ada", "job-1"); err != nil {
		t.Fatal(err)
	}
	if got, err := tbl.Get(ctx, "email.send", "welcome-ada"); err != nil || got.State != idempotency.StateRunning || got.Expired {
		t.Fatalf("Release changed a claimed record: %+v, %v", got.Record, err)
	}

	// A reserved record with another payload hash: the worker refuses the claim (payload
	// mismatch), as it would for any other producer's record of the key.
	if _, _, err := tbl.ReserveQueued(ctx, QueuedJob{Kind: "email.send", Key: "other", JobID: "job-5", PayloadHash: "h-other"}); err != nil {
		t.Fatal(err)
	}
	claim.Key, claim.JobID, claim.Token = "other", "job-5", "tok-5"
	if cr, err := store.Claim(ctx, claim); err != nil || cr.Claimed || cr.Record.PayloadHash != "h-other" {
		t.Fatalf("claim with another hash: %+v, %v", cr, err)
	}

	// An expired record counts as absent: the reservation replaces it.
	putSeeds(t, client, name, seed{kind: "email.send", key: "old", jobID: "job-old", state: idempotency.StateSucceeded, runs: 1,
		upd: testNow.Add(-48 * time.Hour), exp: testNow.Add(-time.Second)})
	fresh, created, err := tbl.ReserveQueued(ctx, QueuedJob{Kind: "email.send", Key: "old", JobID: "job-6", PayloadHash: hash})
	if err != nil || !created || fresh.JobID != "job-6" || fresh.State != idempotency.StateQueued {
		t.Fatalf("reservation over an expired record: %+v created %v, %v", fresh.Record, created, err)
	}

	// Bad arguments name the field.
	if _, _, err := tbl.ReserveQueued(ctx, QueuedJob{Kind: "email.send", Key: "k"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("no job id: %v", err)
	}
}

// TestReleaseQueued: a release frees the key of a reservation whose send failed, and only that
// one: a record of another job id, or one that moved on, is left as it is.
func TestReleaseQueued(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tbl, _, _ := emulatorTable(t)
	if _, created, err := tbl.ReserveQueued(ctx, QueuedJob{Kind: "email.send", Key: "k", JobID: "job-1", PayloadHash: "h1"}); err != nil || !created {
		t.Fatal(created, err)
	}
	// Another job id: not ours, left alone.
	if err := tbl.ReleaseQueued(ctx, "email.send", "k", "job-other"); err != nil {
		t.Fatal(err)
	}
	if got, err := tbl.Get(ctx, "email.send", "k"); err != nil || got.Expired || got.JobID != "job-1" {
		t.Fatalf("release of another job id changed the record: %+v, %v", got.Record, err)
	}
	if err := tbl.ReleaseQueued(ctx, "email.send", "k", "job-1"); err != nil {
		t.Fatal(err)
	}
	if got, err := tbl.Get(ctx, "email.send", "k"); err != nil || !got.Expired {
		t.Fatalf("released record: %+v (expired %v), %v; want it expired", got.Record, got.Expired, err)
	}
	// The key is free: the next reservation writes a new record, with any payload.
	next, created, err := tbl.ReserveQueued(ctx, QueuedJob{Kind: "email.send", Key: "k", JobID: "job-2", PayloadHash: "h2"})
	if err != nil || !created || next.JobID != "job-2" || next.PayloadHash != "h2" {
		t.Fatalf("reservation after a release: %+v created %v, %v", next.Record, created, err)
	}
	// Releasing a key that has no record at all is not an error.
	if err := tbl.ReleaseQueued(ctx, "email.send", "never", "job-9"); err != nil {
		t.Fatal(err)
	}
	if err := tbl.ReleaseQueued(ctx, "email.send", "k", ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty job id: %v", err)
	}
}

// TestMarkSent: the request hash is kept with the reservation; MarkSent stamps the queued
// record of that job only, and a worker's claim (which moves the record on) keeps the hash but is
// not marked again.
func TestMarkSent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tbl, client, name := emulatorTable(t)
	if _, created, err := tbl.ReserveQueued(ctx, QueuedJob{Kind: "email.send", Key: "k", JobID: "job-1", PayloadHash: "h1", RequestHash: "r1"}); err != nil || !created {
		t.Fatal(created, err)
	}
	got, err := tbl.Get(ctx, "email.send", "k")
	if err != nil || got.RequestHash != "r1" || !got.SentAt.IsZero() {
		t.Fatalf("reservation: %+v (request hash %q, sent %v), %v", got.Record, got.RequestHash, got.SentAt, err)
	}
	// Another job id: not ours, left alone.
	if err := tbl.MarkSent(ctx, "email.send", "k", "job-other", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := tbl.Get(ctx, "email.send", "k"); !got.SentAt.IsZero() {
		t.Fatalf("a mark of another job id stamped the record: %v", got.SentAt)
	}
	at := testNow.Add(1234 * time.Millisecond)
	if err := tbl.MarkSent(ctx, "email.send", "k", "job-1", at); err != nil {
		t.Fatal(err)
	}
	if got, err := tbl.Get(ctx, "email.send", "k"); err != nil || !got.SentAt.Equal(at) || got.State != idempotency.StateQueued || got.RequestHash != "r1" {
		t.Fatalf("marked record: %+v (sent %v, request hash %q), %v; want sent at %v", got.Record, got.SentAt, got.RequestHash, err, at)
	}
	// A record a worker claimed is not queued: a mark leaves it alone, without an error.
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: client, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	if _, created, err := tbl.ReserveQueued(ctx, QueuedJob{Kind: "email.send", Key: "k2", JobID: "job-2", PayloadHash: "h2"}); err != nil || !created {
		t.Fatal(created, err)
	}
	if res, err := store.Claim(ctx, idempotency.ClaimRequest{Kind: "email.send", Key: "k2", JobID: "job-2", PayloadHash: "h2", Token: "t",
		Now: testNow, LeaseUntil: testNow.Add(time.Minute)}); err != nil || !res.Claimed {
		t.Fatal(res, err)
	}
	if err := tbl.MarkSent(ctx, "email.send", "k2", "job-2", at); err != nil {
		t.Fatal(err)
	}
	if got, _ := tbl.Get(ctx, "email.send", "k2"); !got.SentAt.IsZero() || got.State != idempotency.StateRunning {
		t.Fatalf("a mark of a claimed record: %+v (sent %v)", got.Record, got.SentAt)
	}
	if err := tbl.MarkSent(ctx, "email.send", "k", "", at); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty job id: %v", err)
	}
}

// TestJobLapsed: only a record that expired while its job waited (queued, scheduled) is lapsed.
func TestJobLapsed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		state   idempotency.State
		expired bool
		want    bool
	}{
		{idempotency.StateQueued, true, true},
		{idempotency.StateScheduled, true, true},
		{idempotency.StateQueued, false, false},
		{idempotency.StateSucceeded, true, false},
		{idempotency.StateDead, true, false},
		{idempotency.StateRunning, true, false},
		{idempotency.StateCancelled, true, false},
	} {
		j := Job{Record: idempotency.Record{State: tc.state}, Expired: tc.expired}
		if got := j.Lapsed(); got != tc.want {
			t.Errorf("%s, expired %v: Lapsed %v, want %v", tc.state, tc.expired, got, tc.want)
		}
	}
}

// TestReserveQueuedConcurrent: many producers reserve one key at once on the emulator; exactly
// one writes the record, and every other one gets that record back.
func TestReserveQueuedConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tbl, _, _ := emulatorTable(t)
	const n = 16
	var (
		wg      sync.WaitGroup
		created atomic.Int32
		mu      sync.Mutex
		ids     = map[string]int{}
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j, ok, err := tbl.ReserveQueued(ctx, QueuedJob{Kind: "email.send", Key: "race", JobID: "job-" + string(rune('a'+i)), PayloadHash: "h"})
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				created.Add(1)
			}
			mu.Lock()
			ids[j.JobID]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if created.Load() != 1 || len(ids) != 1 {
		t.Fatalf("%d reservations wrote the record; job ids returned %v; want one writer and one id for all", created.Load(), ids)
	}
}

// allOldDB answers PutItem with a conditional failure carrying the old item, as DynamoDB does
// with ReturnValuesOnConditionCheckFailure=ALL_OLD, and counts the reads it is asked for.
type allOldDB struct {
	fakeDB
	old   map[string]types.AttributeValue
	gets  atomic.Int32
	asked types.ReturnValuesOnConditionCheckFailure
}

func (f *allOldDB) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	f.asked = in.ReturnValuesOnConditionCheckFailure
	return nil, &types.ConditionalCheckFailedException{Message: new(string), Item: f.old}
}

func (f *allOldDB) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	f.gets.Add(1)
	return &dynamodb.GetItemOutput{}, nil
}

// TestReserveQueuedUsesAllOld: where the backend returns the old item with the conditional
// failure (DynamoDB), a repeated reservation costs the one write and no read.
func TestReserveQueuedUsesAllOld(t *testing.T) {
	t.Parallel()
	old := seed{kind: "email.send", key: "k", jobID: "job-1", state: idempotency.StateSucceeded, runs: 1, upd: testNow, exp: testNow.Add(time.Hour)}
	db := &allOldDB{old: old.item(idempotency.DefaultShards)}
	tbl, err := New(Config{Client: db, Table: "jobs", Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	j, created, err := tbl.ReserveQueued(context.Background(), QueuedJob{Kind: "email.send", Key: "k", JobID: "job-2", PayloadHash: "h-k"})
	if err != nil || created || j.JobID != "job-1" || j.State != idempotency.StateSucceeded {
		t.Fatalf("got %+v created %v, %v", j.Record, created, err)
	}
	if db.asked != types.ReturnValuesOnConditionCheckFailureAllOld || db.gets.Load() != 0 {
		t.Errorf("asked for %q and read %d times; want ALL_OLD and no read", db.asked, db.gets.Load())
	}
}
