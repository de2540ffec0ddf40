package status

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// layoutRig is a job table on the emulator with a status Table and the worker's store on it.
type layoutRig struct {
	t      *testing.T
	tbl    *Table
	client *dynamodb.Client
	name   string
	store  *idempotency.DynamoDBStore
	now    time.Time
}

func newLayoutRig(t *testing.T, layout idempotency.Layout) *layoutRig {
	t.Helper()
	tbl, client, name := emulatorTable(t)
	tbl.layout = layout
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: client, Table: name, Layout: layout})
	if err != nil {
		t.Fatal(err)
	}
	return &layoutRig{t: t, tbl: tbl, client: client, name: name, store: store, now: testNow.Add(-time.Hour)}
}

// run claims and finishes one run of the job (kind, key, jobID) in state.
func (r *layoutRig) run(kind, key, jobID string, state idempotency.State, fresh bool) idempotency.ClaimResult {
	r.t.Helper()
	ctx := context.Background()
	r.now = r.now.Add(time.Second)
	tok := "tok-" + r.now.Format("150405")
	res, err := r.store.Claim(ctx, idempotency.ClaimRequest{Kind: kind, Key: key, JobID: jobID, PayloadHash: "h", Token: tok,
		Now: r.now, LeaseUntil: r.now.Add(time.Minute), ExpiresAt: r.now.Add(14 * 24 * time.Hour), Fresh: fresh})
	if err != nil {
		r.t.Fatal(err)
	}
	if !res.Claimed || state == idempotency.StateRunning {
		return res
	}
	f := idempotency.Finish{Kind: kind, Key: key, JobID: jobID, Token: tok, State: state, Now: r.now.Add(time.Millisecond),
		ExpiresAt: r.now.Add(14 * 24 * time.Hour)}
	if state != idempotency.StateSucceeded {
		f.Error, f.Reason = "boom", "exhausted"
	}
	if err := r.store.Finish(ctx, f); err != nil {
		r.t.Fatal(err)
	}
	return res
}

// raw reads an item as it is stored.
func (r *layoutRig) raw(pk string) map[string]types.AttributeValue {
	r.t.Helper()
	out, err := r.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(r.name),
		Key: map[string]types.AttributeValue{idempotency.AttrPK: attrS(pk)}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		r.t.Fatal(err)
	}
	return out.Item
}

// countingDDB counts the calls of a client.
type countingDDB struct {
	DynamoDBAPI
	gets, queries, batches atomic.Int64
}

func (c *countingDDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.gets.Add(1)
	return c.DynamoDBAPI.GetItem(ctx, in, o...)
}

func (c *countingDDB) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.queries.Add(1)
	return c.DynamoDBAPI.Query(ctx, in, o...)
}

func (c *countingDDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.batches.Add(1)
	return c.DynamoDBAPI.BatchGetItem(ctx, in, o...)
}

// TestJobKeyedByItsID: a job enqueued without a key has its record under its id, with no by_id
// entry, and every reader finds it: Get by kind and key (its id), GetByID with one direct read,
// List by state and kind.
func TestJobKeyedByItsID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newLayoutRig(t, idempotency.LayoutByID)
	r.run("email.send", "01JOBA", "01JOBA", idempotency.StateSucceeded, true)
	r.run("email.send", "01JOBD", "01JOBD", idempotency.StateDead, true)

	item := r.raw(idempotency.IDItemKey("01JOBA"))
	if item == nil {
		t.Fatalf("no item under %s", idempotency.IDItemKey("01JOBA"))
	}
	for _, a := range []string{idempotency.AttrJobID, idempotency.AttrKey} {
		if _, ok := item[a]; ok {
			t.Errorf("the item of a job keyed by its id has %s (the by_id index would be written): %v", a, item)
		}
	}
	if r.raw(idempotency.ItemKey("email.send", "01JOBA")) != nil {
		t.Error("an item under kind#key was written too")
	}

	j, err := r.tbl.Get(ctx, "email.send", "01JOBA")
	if err != nil || j.State != idempotency.StateSucceeded || j.JobID != "01JOBA" || j.Key != "01JOBA" || j.Kind != "email.send" {
		t.Errorf("Get = %+v, %v", j, err)
	}
	if _, err := r.tbl.Get(ctx, "sms.send", "01JOBA"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of another kind with the id as key = %v, want ErrNotFound", err)
	}
	counter := &countingDDB{DynamoDBAPI: r.tbl.client}
	r.tbl.client = counter
	j, err = r.tbl.GetByID(ctx, "01JOBA")
	if err != nil || j.Key != "01JOBA" || j.State != idempotency.StateSucceeded {
		t.Errorf("GetByID = %+v, %v", j, err)
	}
	if counter.gets.Load() != 1 || counter.batches.Load() != 0 {
		t.Errorf("GetByID of a job keyed by its id: %d GetItem, %d BatchGetItem; want 1 direct read (and the by_id query: %d)",
			counter.gets.Load(), counter.batches.Load(), counter.queries.Load())
	}
	page, err := r.tbl.List(ctx, ListQuery{State: idempotency.StateDead, Kind: "email.send"})
	if err != nil || len(page.Jobs) != 1 || page.Jobs[0].JobID != "01JOBD" || page.Jobs[0].Reason != "exhausted" {
		t.Errorf("List(dead, email.send) = %+v, %v", page.Jobs, err)
	}
}

// TestOldLayoutStillRead: records written under the earlier layout (every job under kind#key with
// its job_id) are found by Get, GetByID, List and Cancel of a Table on the default layout; a job
// with records in both places (claimed before and after an upgrade) reads as its newer one.
func TestOldLayoutStillRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	old := newLayoutRig(t, idempotency.LayoutKindKey)
	old.run("email.send", "01OLD", "01OLD", idempotency.StateSucceeded, true)
	old.run("email.send", "01OLDR", "01OLDR", idempotency.StateRetrying, false)
	if old.raw(idempotency.ItemKey("email.send", "01OLD"))[idempotency.AttrJobID] == nil {
		t.Fatal("LayoutKindKey did not write the job id under kind#key")
	}
	tbl := old.tbl
	tbl.layout = idempotency.LayoutByID
	if j, err := tbl.Get(ctx, "email.send", "01OLD"); err != nil || j.State != idempotency.StateSucceeded {
		t.Errorf("Get of an old-layout record = %+v, %v", j, err)
	}
	if j, err := tbl.GetByID(ctx, "01OLD"); err != nil || j.State != idempotency.StateSucceeded || j.Key != "01OLD" {
		t.Errorf("GetByID of an old-layout record = %+v, %v", j, err)
	}
	page, err := tbl.List(ctx, ListQuery{State: idempotency.StateRetrying})
	if err != nil || len(page.Jobs) != 1 || page.Jobs[0].JobID != "01OLDR" {
		t.Errorf("List(retrying) = %+v, %v", page.Jobs, err)
	}
	// After the upgrade, a redelivery of the retrying job is claimed under its id: the newer
	// record is the one every reader shows.
	fresh := &layoutRig{t: t, tbl: tbl, client: old.client, name: old.name, now: old.now.Add(time.Minute)}
	fresh.store, err = idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: old.client, Table: old.name})
	if err != nil {
		t.Fatal(err)
	}
	fresh.run("email.send", "01OLDR", "01OLDR", idempotency.StateSucceeded, false)
	if j, err := tbl.Get(ctx, "email.send", "01OLDR"); err != nil || j.State != idempotency.StateSucceeded {
		t.Errorf("Get after the upgrade = %+v, %v; want the newer, succeeded record", j, err)
	}
	if j, err := tbl.GetByID(ctx, "01OLDR"); err != nil || j.State != idempotency.StateSucceeded {
		t.Errorf("GetByID after the upgrade = %+v, %v; want the newer, succeeded record", j, err)
	}
	if err := tbl.Cancel(ctx, "email.send", "01OLD", time.Time{}, "x"); !errors.Is(err, ErrSucceeded) {
		t.Errorf("Cancel of an old-layout succeeded record = %v, want ErrSucceeded", err)
	}
}

// TestStatusWritesForJobsKeyedByTheirID: the records this package writes for a job without a key
// of its own (queued, reserved, scheduled, cancelled) are where the worker's claim looks, in both
// layouts; a redrive resets the job's record and a release frees it.
func TestStatusWritesForJobsKeyedByTheirID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, layout := range []idempotency.Layout{idempotency.LayoutByID, idempotency.LayoutKindKey} {
		t.Run(layout.String(), func(t *testing.T) {
			t.Parallel()
			r := newLayoutRig(t, layout)
			tbl := r.tbl
			exp := testNow.Add(time.Hour)

			// queued → claimed (the claim updates it: runs 1) → succeeded.
			if err := tbl.RecordQueued(ctx, QueuedJob{Kind: "k", Key: "01Q", JobID: "01Q", PayloadHash: "h", At: r.now, ExpiresAt: exp}); err != nil {
				t.Fatal(err)
			}
			if res := r.run("k", "01Q", "01Q", idempotency.StateSucceeded, false); !res.Claimed || res.Record.Runs != 1 {
				t.Errorf("claim of a queued record: %+v", res)
			}
			if j, err := tbl.GetByID(ctx, "01Q"); err != nil || j.State != idempotency.StateSucceeded {
				t.Errorf("GetByID = %+v, %v", j, err)
			}

			// scheduled: listed, then claimed.
			if err := tbl.RecordScheduled(ctx, ScheduledJob{Kind: "k", Key: "01S", JobID: "01S", At: r.now, RunAt: testNow, ExpiresAt: exp}); err != nil {
				t.Fatal(err)
			}
			if page, err := tbl.List(ctx, ListQuery{State: idempotency.StateScheduled}); err != nil || len(page.Jobs) != 1 || page.Jobs[0].JobID != "01S" {
				t.Errorf("List(scheduled) = %+v, %v", page.Jobs, err)
			}
			if res := r.run("k", "01S", "01S", idempotency.StateRunning, false); !res.Claimed {
				t.Errorf("claim of a scheduled record: %+v", res)
			}

			// reserved (the API), then a repeat finds it; released, the key is free again.
			j, created, err := tbl.ReserveQueued(ctx, QueuedJob{Kind: "k", Key: "01R", JobID: "01R", PayloadHash: "h", At: r.now})
			if err != nil || !created || j.JobID != "01R" {
				t.Fatalf("ReserveQueued = %+v, %v, %v", j, created, err)
			}
			if j, created, err := tbl.ReserveQueued(ctx, QueuedJob{Kind: "k", Key: "01R", JobID: "01R", PayloadHash: "h", At: r.now}); err != nil || created || j.JobID != "01R" {
				t.Errorf("a repeated ReserveQueued = %+v, %v, %v; want the first reservation", j, created, err)
			}
			if err := tbl.MarkSent(ctx, "k", "01R", "01R", r.now.Add(time.Second)); err != nil {
				t.Fatal(err)
			}
			if j, err := tbl.Get(ctx, "k", "01R"); err != nil || j.SentAt.IsZero() {
				t.Errorf("after MarkSent: %+v, %v; want SentAt set", j, err)
			}
			if err := tbl.ReleaseQueued(ctx, "k", "01R", "01R"); err != nil {
				t.Fatal(err)
			}
			if j, err := tbl.Get(ctx, "k", "01R"); err != nil || !j.Expired {
				t.Errorf("after ReleaseQueued: %+v, %v; want an expired record", j, err)
			}

			// cancelled before any record: the delivery that comes later is not run.
			if err := tbl.Cancel(ctx, "k", "01C", time.Time{}, "not needed"); err != nil {
				t.Fatal(err)
			}
			if res := r.run("k", "01C", "01C", idempotency.StateSucceeded, true); res.Claimed || res.Record.State != idempotency.StateCancelled {
				t.Errorf("a delivery after Cancel: %+v; want refused by the cancelled record", res)
			}
			// An explicit key cancelled before any record: the same.
			if err := tbl.Cancel(ctx, "k", "order-7", time.Time{}, ""); err != nil {
				t.Fatal(err)
			}
			if res := r.run("k", "order-7", "01X", idempotency.StateSucceeded, true); res.Claimed {
				t.Errorf("a delivery of key order-7 after Cancel was claimed: %+v", res)
			}
			// running with an expired lease (its worker is gone): cancelled at once, and the run's
			// outcome is not recorded over it.
			r.run("k", "01RUN", "01RUN", idempotency.StateRunning, true)
			if err := tbl.Cancel(ctx, "k", "01RUN", time.Time{}, "stop"); err != nil {
				t.Fatal(err)
			}
			if j, err := tbl.GetByID(ctx, "01RUN"); err != nil || j.State != idempotency.StateCancelled {
				t.Errorf("after Cancel of a running job: %+v, %v", j, err)
			}

			// dead → reset for a redrive: retrying with its runs cleared, claimable.
			r.run("k", "01D", "01D", idempotency.StateDead, true)
			if err := tbl.ResetForRedrive(ctx, "k", "01D", false); err != nil {
				t.Fatal(err)
			}
			if j, err := tbl.GetByID(ctx, "01D"); err != nil || j.State != idempotency.StateRetrying || j.Runs != 0 {
				t.Errorf("after ResetForRedrive: %+v, %v", j, err)
			}
			if res := r.run("k", "01D", "01D", idempotency.StateSucceeded, false); !res.Claimed || res.Record.Runs != 1 {
				t.Errorf("claim after the reset: %+v", res)
			}

			// Where the records are: under the id in LayoutByID, under kind#key otherwise.
			wantPK, otherPK := idempotency.IDItemKey("01Q"), idempotency.ItemKey("k", "01Q")
			if layout == idempotency.LayoutKindKey {
				wantPK, otherPK = otherPK, wantPK
			}
			if r.raw(wantPK) == nil || r.raw(otherPK) != nil {
				t.Errorf("%v: the record is not (only) under %s", layout, wantPK)
			}
		})
	}
}

// TestQueuedWriteOfAJobKeyedByItsID: the outbox's queued record of a job without a key goes under
// the job's id, where the worker's claim (and GetByID's direct read) find it.
func TestQueuedWriteOfAJobKeyedByItsID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newLayoutRig(t, idempotency.LayoutByID)
	w, err := r.tbl.QueuedWrite(QueuedJob{Kind: "k", Key: "01OUT", JobID: "01OUT", PayloadHash: "h", At: r.now, ExpiresAt: testNow.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{w}}); err != nil {
		t.Fatal(err)
	}
	if r.raw(idempotency.IDItemKey("01OUT")) == nil {
		t.Fatalf("no queued record under %s", idempotency.IDItemKey("01OUT"))
	}
	if res := r.run("k", "01OUT", "01OUT", idempotency.StateSucceeded, false); !res.Claimed || res.Record.Runs != 1 {
		t.Errorf("claim of the outbox's queued record: %+v", res)
	}
	if j, err := r.tbl.GetByID(ctx, "01OUT"); err != nil || j.State != idempotency.StateSucceeded {
		t.Errorf("GetByID = %+v, %v", j, err)
	}
}
