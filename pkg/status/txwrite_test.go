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

// CancelAction in a transaction cancels a waiting record (with the Extra's attribute) or writes a
// new cancelled record where there is none; a record that changed since it was read cancels the
// transaction; succeeded and cancelled records have nothing to write.
func TestCancelActionInATransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tbl, client, name := emulatorTable(t)
	x := idempotency.Extra{
		Condition: "attribute_not_exists(#x_bc)",
		Set:       []string{"#x_bc = :x_bc"},
		Names:     map[string]string{"#x_bc": "bc"},
		Values:    map[string]types.AttributeValue{":x_bc": attrS("cancelled")},
	}
	run := func(items ...types.TransactWriteItem) error {
		_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		return err
	}
	putSeeds(t, client, name,
		seed{kind: "img.resize", key: "k-q", jobID: "j-q", state: idempotency.StateQueued, upd: testNow.Add(-time.Minute), exp: testNow.Add(time.Hour)},
		seed{kind: "img.resize", key: "k-ok", jobID: "j-ok", state: idempotency.StateSucceeded, runs: 1, upd: testNow.Add(-time.Minute), exp: testNow.Add(time.Hour)},
	)
	old := rawItem(t, client, name, idempotency.ItemKey("img.resize", "k-q"))
	a, err := tbl.CancelAction("img.resize", "k-q", "j-q", old, testNow, "batch cancelled", x)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(a); err != nil {
		t.Fatal(err)
	}
	j, err := tbl.Get(ctx, "img.resize", "k-q")
	if err != nil {
		t.Fatal(err)
	}
	if j.State != idempotency.StateCancelled || j.Reason != "batch cancelled" {
		t.Errorf("record after CancelAction: %+v", j)
	}
	if got, _ := getS(rawItem(t, client, name, idempotency.ItemKey("img.resize", "k-q")), "bc"); got != "cancelled" {
		t.Errorf("bc = %q, want the Extra's assignment", got)
	}
	// The same action again: the record changed since it was read.
	var tce *types.TransactionCanceledException
	if err := run(a); !errors.As(err, &tce) {
		t.Errorf("a stale CancelAction: %v, want a TransactionCanceledException", err)
	}

	// No record: a new cancelled record under the job's key (its id here), with the Extra.
	a, err = tbl.CancelAction("img.resize", "j-new", "j-new", nil, testNow, "", x)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(a); err != nil {
		t.Fatal(err)
	}
	item := rawItem(t, client, name, idempotency.IDItemKey("j-new"))
	if st, _ := getS(item, idempotency.AttrState); st != string(idempotency.StateCancelled) {
		t.Errorf("new record's state %q", st)
	}
	if got, _ := getS(item, "bc"); got != "cancelled" {
		t.Errorf("new record's bc = %q", got)
	}
	if err := run(a); !errors.As(err, &tce) {
		t.Errorf("a second Put where the record now exists: %v, want a TransactionCanceledException", err)
	}

	ok := rawItem(t, client, name, idempotency.ItemKey("img.resize", "k-ok"))
	if _, err := tbl.CancelAction("img.resize", "k-ok", "j-ok", ok, testNow, "", x); !errors.Is(err, ErrSucceeded) {
		t.Errorf("CancelAction of a succeeded record: %v, want ErrSucceeded", err)
	}
	if _, err := tbl.CancelAction("img.resize", "k-q", "j-q", rawItem(t, client, name, idempotency.ItemKey("img.resize", "k-q")), testNow, "", x); !errors.Is(err, ErrCancelled) {
		t.Errorf("CancelAction of a cancelled record: %v, want ErrCancelled", err)
	}
	if _, err := tbl.CancelAction("img.resize", "j-x", "j-x", nil, testNow, "", idempotency.Extra{Set: []string{"#x_a = :x_a + :x_b"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("CancelAction of a new record with an assignment that is no attribute: %v, want ErrInvalid", err)
	}
}
