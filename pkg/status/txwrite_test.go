package status

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// QueuedWrite in a transaction writes what RecordQueued writes where the key has no record, and
// leaves an existing record (a job further along) alone without cancelling the transaction.
func TestQueuedWriteInATransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tbl, client, name := emulatorTable(t)
	exp := testNow.Add(time.Hour)
	j := QueuedJob{Kind: "email.send", Key: "k-new", JobID: "job-new", PayloadHash: "h", At: testNow, ExpiresAt: exp}
	w, err := tbl.QueuedWrite(j)
	if err != nil {
		t.Fatal(err)
	}
	putSeeds(t, client, name, seed{kind: "email.send", key: "k-done", jobID: "job-old", state: idempotency.StateSucceeded, runs: 1, upd: testNow.Add(-time.Minute), exp: exp})
	before := rawItem(t, client, name, idempotency.ItemKey("email.send", "k-done"))
	w2, err := tbl.EnqueuedWrite("email.send", "k-done", "job-twin", "h2", testNow)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{w, w2}}); err != nil {
		t.Fatalf("transaction: %v", err)
	}
	got := rawItem(t, client, name, idempotency.ItemKey("email.send", "k-new"))
	// The same item RecordQueued writes, attribute for attribute.
	other, _, otherName := emulatorTable(t)
	if err := other.RecordQueued(ctx, j); err != nil {
		t.Fatal(err)
	}
	want := rawItem(t, client, otherName, idempotency.ItemKey("email.send", "k-new"))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("QueuedWrite wrote\n %#v\nRecordQueued writes\n %#v", got, want)
	}
	rec, err := tbl.Get(ctx, "email.send", "k-new")
	if err != nil || rec.State != idempotency.StateQueued || rec.JobID != "job-new" || rec.PayloadHash != "h" || !rec.ExpiresAt.Equal(exp) {
		t.Errorf("queued record %+v, %v", rec, err)
	}
	if after := rawItem(t, client, name, idempotency.ItemKey("email.send", "k-done")); !reflect.DeepEqual(after, before) {
		t.Errorf("the succeeded record changed:\n before %#v\n after  %#v", before, after)
	}
}

func TestQueuedWriteValidates(t *testing.T) {
	t.Parallel()
	tbl, err := New(Config{Client: &fakeDB{}, Table: "jobs", Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []QueuedJob{
		{Kind: "Bad Kind", Key: "k", JobID: "j"},
		{Kind: "email.send", JobID: "j"},
		{Kind: "email.send", Key: "k"},
		{Kind: "email.send", Key: "k", JobID: "j", At: testNow, ExpiresAt: testNow},
	} {
		if _, err := tbl.QueuedWrite(j); !errors.Is(err, ErrInvalid) {
			t.Errorf("QueuedWrite(%+v) = %v, want ErrInvalid", j, err)
		}
	}
	w, err := tbl.EnqueuedWrite("email.send", "k", "j", "", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(w.Update.TableName) != "jobs" || w.Update.ConditionExpression != nil {
		t.Errorf("EnqueuedWrite = %+v: want an unconditional update of table jobs", w.Update)
	}
	exp := w.Update.ExpressionAttributeValues
	found := false
	for _, v := range exp {
		if n, ok := v.(*types.AttributeValueMemberN); ok && n.Value == "1797242400" { // testNow + 15 days, in seconds
			found = true
		}
	}
	if !found {
		t.Errorf("EnqueuedWrite's expiry is not At + CancelTTL (15 days): %v", exp)
	}
}
