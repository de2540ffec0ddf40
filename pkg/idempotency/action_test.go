package idempotency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// TestFinishActionInTransaction: FinishAction's write, run in a TransactWriteItems with another
// item's write, records the outcome as Finish does, with the Extra's condition and assignments;
// a stale token or a failing Extra condition cancels the whole transaction and writes nothing.
func TestFinishActionInTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := emulatorClient(t)
	table := newTable(t, client)
	store := newDynamoDBStore(t, client, table)
	now := time.Now().UTC().Truncate(time.Millisecond)
	claim := func(key, token string) {
		mustClaimed(t, store, idempotency.ClaimRequest{Kind: "k.a", Key: key, JobID: key, Token: token, Now: now,
			LeaseUntil: now.Add(time.Minute)}, true)
	}
	other := func(n string) types.TransactWriteItem {
		return types.TransactWriteItem{Update: &types.Update{
			TableName:                 aws.String(table),
			Key:                       map[string]types.AttributeValue{idempotency.AttrPK: &types.AttributeValueMemberS{Value: "other:" + n}},
			UpdateExpression:          aws.String("ADD #n :one"),
			ExpressionAttributeNames:  map[string]string{"#n": "n"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
		}}
	}
	extra := idempotency.Extra{
		Condition: "attribute_not_exists(#x_bc)",
		Set:       []string{"#x_bc = :x_bc"},
		Names:     map[string]string{"#x_bc": "bc"},
		Values:    map[string]types.AttributeValue{":x_bc": &types.AttributeValueMemberS{Value: "succeeded"}},
	}
	run := func(items ...types.TransactWriteItem) error {
		_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		return err
	}
	raw := func(pk string) map[string]types.AttributeValue {
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{idempotency.AttrPK: &types.AttributeValueMemberS{Value: pk}}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}

	claim("a", "tok-a")
	fin := idempotency.Finish{Kind: "k.a", Key: "a", JobID: "a", Token: "tok-a", State: idempotency.StateSucceeded,
		Result: `{"n":1}`, Now: now.Add(time.Second), ExpiresAt: now.Add(time.Hour)}
	act, err := store.FinishAction(fin, extra)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(act, other("a")); err != nil {
		t.Fatal(err)
	}
	rec, err := store.Get(ctx, "k.a", "a")
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != idempotency.StateSucceeded || rec.Token != "" || rec.Result != `{"n":1}` {
		t.Errorf("record after the transaction: %+v", rec)
	}
	if bc, ok := raw("#a")["bc"].(*types.AttributeValueMemberS); !ok || bc.Value != "succeeded" {
		t.Errorf("the Extra's assignment was not written: %v", raw("#a")["bc"])
	}
	if n := raw("other:a")["n"]; n == nil {
		t.Error("the other action was not written")
	}

	// A second finish with the same token: the claim is gone, the transaction writes nothing.
	act, err = store.FinishAction(fin, idempotency.Extra{})
	if err != nil {
		t.Fatal(err)
	}
	var tce *types.TransactionCanceledException
	if err := run(act, other("b")); !errors.As(err, &tce) {
		t.Fatalf("finish of a lost claim in a transaction: %v, want a TransactionCanceledException", err)
	}
	if raw("other:b") != nil {
		t.Error("a cancelled transaction wrote its other action")
	}

	// The claim holds, but the Extra's condition does not: nothing is written either.
	claim("c", "tok-c")
	if err := run(mustAction(t, store, idempotency.Finish{Kind: "k.a", Key: "c", JobID: "c", Token: "tok-c",
		State: idempotency.StateDead, Reason: "exhausted", Error: "boom", Now: now.Add(time.Second)}, idempotency.Extra{
		Condition: "attribute_exists(#x_bc)", Names: map[string]string{"#x_bc": "bc"}})); !errors.As(err, &tce) {
		t.Fatalf("an Extra condition that fails: %v, want a TransactionCanceledException", err)
	}
	if rec, _ := store.Get(ctx, "k.a", "c"); rec.State != idempotency.StateRunning || rec.Token != "tok-c" {
		t.Errorf("the record changed although the transaction was cancelled: %+v", rec)
	}

	// MarkDeadAction creates the dead record of a job that has none, with the Extra.
	mark := idempotency.DeadMark{Kind: "k.a", Key: "d", JobID: "d", Reason: "unknown_kind", Error: "no worker", Now: now}
	act, err = store.MarkDeadAction(mark, extra)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(act, other("d")); err != nil {
		t.Fatal(err)
	}
	if rec, _ := store.Get(ctx, "k.a", "d"); rec.State != idempotency.StateDead || rec.Reason != "unknown_kind" {
		t.Errorf("record after the dead mark: %+v", rec)
	}
	// Marking it again is refused (the record is dead already) and cancels the transaction.
	act, _ = store.MarkDeadAction(mark, idempotency.Extra{})
	if err := run(act, other("e")); !errors.As(err, &tce) {
		t.Fatalf("a second dead mark in a transaction: %v, want a TransactionCanceledException", err)
	}
}

func mustAction(t *testing.T, s *idempotency.DynamoDBStore, f idempotency.Finish, x idempotency.Extra) types.TransactWriteItem {
	t.Helper()
	a, err := s.FinishAction(f, x)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestExtraPlaceholders: an Extra whose placeholders could clash with the store's own is refused
// before any call.
func TestExtraPlaceholders(t *testing.T) {
	t.Parallel()
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: failingClient{}, Table: "jobs"})
	if err != nil {
		t.Fatal(err)
	}
	f := idempotency.Finish{Kind: "k.a", Key: "a", Token: "t", State: idempotency.StateSucceeded, Now: time.Now()}
	for _, x := range []idempotency.Extra{
		{Names: map[string]string{"#st": "st"}},
		{Values: map[string]types.AttributeValue{":tok": &types.AttributeValueMemberS{Value: "x"}}},
	} {
		if _, err := store.FinishAction(f, x); !errors.Is(err, idempotency.ErrExtra) {
			t.Errorf("FinishAction with %+v: %v, want ErrExtra", x, err)
		}
	}
	if _, err := store.FinishAction(idempotency.Finish{Kind: "k.a"}, idempotency.Extra{}); err == nil {
		t.Error("FinishAction of an invalid Finish: no error")
	}
}
